"""Harness tests: a real gateway in front of a scripted model, on the real broker, and
real local sandboxes (bubblewrap) from the shared base image."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator

import pytest

from rllm.sandboxes import SandboxBackend, SandboxSettings, get_backend
from tests.fakes.scripted import ScriptedUpstream, start_scripted_upstream
from tests.integration.producers.harnesses.helpers import HARNESS_CACHE, HELLO_SCRIPT


@pytest.fixture
def local_sandbox_tools() -> None:
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.fail("the local backend needs root and bubblewrap (apt-get install -y bubblewrap)")


@pytest.fixture(autouse=True)
def harness_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host-side installs go to ``$RLLM_HARNESS_HOME`` when set, else the shared cache."""
    monkeypatch.setenv("RLLM_HARNESS_HOME", os.environ.get("RLLM_HARNESS_HOME", HARNESS_CACHE))


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    """The scripted model (the gateway's upstream); a test may replace ``.script``."""
    server = start_scripted_upstream(list(HELLO_SCRIPT))
    yield server
    server.stop()


@pytest.fixture
async def backend(sandbox_settings: SandboxSettings) -> AsyncIterator[SandboxBackend]:
    """The local backend on the test's own home (the shared image store)."""
    made = get_backend("local", sandbox_settings)
    yield made
    await made.aclose()
