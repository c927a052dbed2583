"""Helpers of the harness tests: the scripted answers that solve ``hello-file``, the shared
install cache, and the mark of tests that need the local sandbox backend."""

from __future__ import annotations

import pytest

HELLO_SCRIPT = ["run: printf 'Hello, Harbor!\\n' > /app/hello.txt", "done"]
"""The bash harness's answers that solve ``hello-file``: one command, then done."""

HARNESS_CACHE = "/var/tmp/rllm-test-harnesses"
"""Where tests install host-side harnesses (npm, PyPI): kept across runs, so a machine pays
each install once."""

needs_local_sandbox = pytest.mark.usefixtures("local_sandbox_tools")
"""The local backend needs root and bubblewrap: .ci/run installs them, so without them the
test fails with the fix, never skips."""
