"""Helpers of the harness tests: the scripted answers that solve
``hello-file``, the shared install cache, the mark of tests that need the local sandbox
backend, and what a test reads back (a session's payloads, the sandboxes left alive)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from rllm.producers.harnesses import Harness, HarnessRollout, get_harness
from rllm.producers.sdk import GatewayClient
from rllm.sandboxes import OWNER_LABEL, SandboxBackend
from rllm.schemas.types import SessionPayload
from tests.integration.producers.gateway.fixtures import Events

HELLO_SCRIPT = ["run: printf 'Hello, Harbor!\\n' > /app/hello.txt", "done"]
"""The bash harness's answers that solve ``hello-file``: one command, then done."""

HARNESS_CACHE = "/var/tmp/rllm-test-harnesses"
"""Where tests install host-side harnesses (npm, PyPI): kept across runs, so a machine pays
each install once."""

needs_local_sandbox = pytest.mark.usefixtures("local_sandbox_tools")
"""The local backend needs root and bubblewrap: .ci/run installs them, so without them the
test fails with the fix, never skips."""


def session_payloads(events: Events, session_id: str) -> list[SessionPayload]:
    """The payloads of one session's events, in order."""
    return [e.payload for key, e in events() if key == session_id]


async def alive(backend: SandboxBackend, owner: str) -> list[str]:
    """The ids of ``owner``'s sandboxes still alive (none, after a run)."""
    return [s.id for s in await backend.sandboxes({OWNER_LABEL: owner}) if s.alive]


@dataclass(frozen=True)
class Stage:
    """Where a test runs harnesses: a client of a real gateway in front of the scripted
    model, the local sandbox backend, and the test's own ``rllm.owner`` label."""

    client: GatewayClient
    backend: SandboxBackend
    owner: str

    def rollout(self, harness: str | Harness, artifacts_dir: Path | None = None) -> HarnessRollout:
        """A rollout of ``harness`` (a registry name or a harness) whose sandboxes carry
        the test's owner label."""
        made = get_harness(harness) if isinstance(harness, str) else harness
        return HarnessRollout(
            made, self.backend, artifacts_dir=artifacts_dir, labels={OWNER_LABEL: self.owner}
        )

    async def alive(self) -> list[str]:
        """The test's sandboxes still alive (none, after its runs)."""
        return await alive(self.backend, self.owner)
