"""Harness tests: a real gateway in front of a scripted model, on the real broker, and
real local sandboxes (bubblewrap) from the shared base image."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from rllm.producers.sdk import GatewayClient
from rllm.sandboxes import SandboxBackend, SandboxSettings, get_backend
from rllm.settings import KafkaSettings
from tests.fakes.scripted import ScriptedUpstream, start_scripted_upstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.harnesses.helpers import HARNESS_CACHE, HELLO_SCRIPT, Stage
from tests.integration.producers.harnesses.training import TrainOnTasks


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


@pytest.fixture
async def stage(
    start_gateway: Callable[..., ThreadedServer], backend: SandboxBackend
) -> AsyncIterator[Stage]:
    """A client of a real gateway on this test's topics in front of the scripted model, the
    local backend, and an owner label of the test's own."""
    client = GatewayClient(start_gateway().url)
    yield Stage(client, backend, f"harness-{uuid.uuid4().hex[:8]}")
    await client.aclose()


@pytest.fixture
def train_on_tasks(
    kafka: KafkaSettings,
    start_gateway: Callable[..., ThreadedServer],
    sandbox_settings: SandboxSettings,
    tmp_path: Path,
) -> TrainOnTasks:
    """``rllm-cli train --tasks-dir`` on this test's broker, sandboxes and gateway."""
    return TrainOnTasks(kafka, start_gateway, sandbox_settings, tmp_path)
