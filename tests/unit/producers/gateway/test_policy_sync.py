"""Policy sync (issue 36 item 1): the gateway has vLLM / SGLang load each new policy and
stamps it only once the server confirms; a refusal keeps the version served and says why.
The servers are in-process fakes of their documented weight routes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import FunctionType
from typing import Any, cast

import httpx
import pytest

from rllm.producers.gateway.metrics import Metrics
from rllm.producers.gateway.policy import PolicyTracker
from rllm.producers.gateway.settings import GatewaySettings, UpstreamKind
from rllm.producers.gateway.sink import EventSink
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.sync import PolicyLoadRefused, SyncKind, checkpoint_of
from rllm.producers.gateway.upstreams import Upstream
from rllm.schemas.lineage import PolicyPointer
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from tests.fakes.loopback import LoopbackServer
from tests.fakes.server import ThreadedServer
from tests.fakes_training.sglang import FakeSGLang
from tests.fakes_training.vllm import FakeVllm
from tests.unit.producers.gateway.waiting import until


class _Sink:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def submit(self, topic: str, key: str, record: Any) -> None:
        self.records.append(record)


StateOf = Callable[..., tuple[GatewayState, _Sink]]


@pytest.fixture
async def state_of() -> AsyncIterator[StateOf]:
    """``state_of(server, **settings)``: a gateway's state in front of ``server`` (an ASGI
    app, or an ``httpx.MockTransport``-style handler) on a loopback socket, reached through
    the gateway's own upstream stack; all stopped at the end."""
    servers: list[ThreadedServer | LoopbackServer] = []
    upstreams: list[Upstream] = []

    def make(server: Any, **overrides: Any) -> tuple[GatewayState, _Sink]:
        handler = isinstance(server, FunctionType)
        servers.append(LoopbackServer(server) if handler else ThreadedServer(server))
        settings = GatewaySettings(insecure=True, upstream_url=servers[-1].url, **overrides)
        sink = _Sink()
        upstreams.append(Upstream(settings, tokenizer=object()))
        return GatewayState(settings, upstreams[-1], cast(EventSink, sink), Metrics()), sink

    yield make
    for upstream in upstreams:
        await upstream.aclose()
    for running in servers:
        running.stop()


def _checkpoint(tmp_path: Path, version: int, lora: bool, run: str = "r") -> Path:
    folder = tmp_path / run / f"v{version:06d}"
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if lora else "config.json")).write_text("{}")
    return folder


def _record(folder: Path, version: int, run: str = "r") -> PolicyUpdated:
    return PolicyUpdated(
        event_id=f"{run}/v{version}", run_id=run, version=version, checkpoint_uri=folder.as_uri()
    )


async def _tracking(state: GatewayState) -> tuple[PolicyTracker, asyncio.Task[None]]:
    tracker = PolicyTracker(state, poll_s=0.01, max_poll_s=0.05)
    return tracker, asyncio.create_task(tracker.run())


async def test_vllm_steps_keep_the_old_version_until_the_adapter_is_listed(
    tmp_path: Path,
    state_of: StateOf,
) -> None:
    fake = FakeVllm()
    fake.gate = threading.Event()
    state, sink = state_of(fake.app, policy_sync="vllm")
    tracker, task = await _tracking(state)
    try:
        tracker.offer(_record(_checkpoint(tmp_path, 1, lora=True), 1))
        await until(lambda: fake.loading == 1, "the load never reached vLLM")
        assert (state.policy_version, state.served_model) == (0, None), "not loaded yet"
        assert sink.records == []
        fake.gate.set()
        await until(lambda: state.policy_version == 1, "v1 never adopted")
        assert state.served_model == "r-v1"
        assert fake.adapters == {"r-v1": str(tmp_path / "r" / "v000001")}
        assert [(r.run_id, r.version, r.upstream_reports) for r in sink.records] == [("r", 1, True)]
        assert isinstance(sink.records[0], PolicyServed)
        # two more: the adapter before the served one stays for calls in flight
        for version in (2, 3):
            tracker.offer(_record(_checkpoint(tmp_path, version, lora=True), version))
            await until(lambda v=version: state.policy_version == v, f"v{version}")  # type: ignore[misc]  # the default binds each version to its own lambda
        assert (state.served_model, sorted(fake.adapters), fake.unloaded) == (
            "r-v3",
            ["r-v2", "r-v3"],
            ["r-v1"],
        )
    finally:
        task.cancel()


async def test_vllm_refusing_an_adapter_keeps_the_old_version_and_says_why(
    tmp_path: Path,
    state_of: StateOf,
) -> None:
    fake = FakeVllm()
    state, sink = state_of(fake.app, policy_sync="vllm")
    tracker, task = await _tracking(state)
    try:
        tracker.offer(_record(_checkpoint(tmp_path, 1, lora=True), 1))
        await until(lambda: state.policy_version == 1, "v1 never adopted")
        bad = _checkpoint(tmp_path, 2, lora=True)
        fake.refuse.add(str(bad))
        tracker.offer(_record(bad, 2))
        await until(lambda: state.sync_error is not None, "the refusal was never noted")
        assert state.sync_error is not None
        pointer, reason = state.sync_error
        assert pointer == PolicyPointer("r", 2)
        assert "refused LoRA adapter r-v2" in reason and "No adapter found" in reason
        assert (state.policy_version, state.served_model) == (1, "r-v1")
        assert [r.version for r in sink.records] == [1]
        # a newer policy the server loads clears it
        tracker.offer(_record(_checkpoint(tmp_path, 3, lora=True), 3))
        await until(lambda: state.policy_version == 3, "v3 never adopted")
        assert state.sync_error is None
    finally:
        task.cancel()


async def test_vllm_without_runtime_lora_or_dev_mode_is_refused_with_what_to_change(
    tmp_path: Path,
    state_of: StateOf,
) -> None:
    state, _ = state_of(FakeVllm(runtime_lora=False).app, policy_sync="vllm")
    tracker, task = await _tracking(state)
    try:
        tracker.offer(_record(_checkpoint(tmp_path, 1, lora=True), 1))
        await until(lambda: state.sync_error is not None, "never refused")
        assert state.sync_error is not None
        assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in state.sync_error[1]
        tracker.offer(_record(_checkpoint(tmp_path, 2, lora=False), 2))
        await until(lambda: state.sync_error and state.sync_error[0].version == 2, "full")  # type: ignore[arg-type, return-value]  # None until refused: until() reads it as false
        assert "VLLM_SERVER_DEV_MODE=1" in state.sync_error[1]
        assert state.policy_version == 0
    finally:
        task.cancel()


async def test_vllm_dev_mode_reloads_full_weights_and_reads_the_version_back(
    tmp_path: Path,
    state_of: StateOf,
) -> None:
    fake = FakeVllm(dev_mode=True)
    state, sink = state_of(fake.app, policy_sync="vllm", upstream_checkpoint_dir="/mnt/ckpt")
    tracker, task = await _tracking(state)
    try:
        tracker.offer(_record(_checkpoint(tmp_path, 4, lora=False), 4))
        await until(lambda: state.policy_version == 4, "v4 never adopted")
        assert fake.weights_path == "/mnt/ckpt/r/v000004", "the server's view of the folder"
        assert (fake.weight_version, state.served_model) == ("r/v4", None)
        assert sink.records[0].upstream_reports is True
    finally:
        task.cancel()


async def test_sglang_is_stamped_only_after_get_model_info_names_the_checkpoint(
    tmp_path: Path,
    state_of: StateOf,
) -> None:
    fake = FakeSGLang()
    fake.gate = threading.Event()
    state, sink = state_of(fake.app, upstream_kind=UpstreamKind.SGLANG)
    tracker, task = await _tracking(state)
    try:
        folder = _checkpoint(tmp_path, 1, lora=False)
        tracker.offer(_record(folder, 1))
        await until(lambda: fake.loading == 1, "the load never reached SGLang")
        assert state.sync is not None and state.sync.kind is SyncKind.SGLANG
        assert state.policy_version == 0
        fake.gate.set()
        await until(lambda: state.policy_version == 1, "v1 never adopted")
        assert fake.model_path == str(folder)
        bad = _checkpoint(tmp_path, 2, lora=False)
        fake.refuse.add(str(bad))
        tracker.offer(_record(bad, 2))
        await until(lambda: state.sync_error is not None, "never refused")
        assert state.sync_error is not None
        assert "failed to load" in state.sync_error[1] and "no such model" in state.sync_error[1]
        assert (state.policy_version, [r.version for r in sink.records]) == (1, [1])
    finally:
        task.cancel()


async def test_the_local_server_is_detected_and_followed_on_health(state_of: StateOf) -> None:
    reported = {"policy_version": 0, "policy_run": ""}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json=reported)
        return httpx.Response(404)

    state, sink = state_of(handle, follow_policy_updates=True)
    tracker, task = await _tracking(state)
    try:
        tracker.offer(_record(Path("/nowhere/r/v000005"), 5))
        await until(lambda: state.sync is not None, "never detected")
        assert state.sync is not None and state.sync.kind is SyncKind.LOCAL
        await asyncio.sleep(0.05)
        assert state.policy_version == 0, "the server has not loaded it"
        reported.update(policy_version=5, policy_run="r")
        await until(lambda: state.policy_version == 5, "v5 never adopted")
        assert sink.records[0].upstream_reports is True
    finally:
        task.cancel()


def test_a_checkpoint_outside_a_file_system_is_refused(tmp_path: Path) -> None:
    record = PolicyUpdated(event_id="x", run_id="r", version=1, checkpoint_uri="tinker://r/1")
    with pytest.raises(PolicyLoadRefused, match="not in a folder a model server can load"):
        checkpoint_of(record, GatewaySettings(insecure=True))
    folder = _checkpoint(tmp_path, 1, lora=False)
    forced = GatewaySettings(insecure=True, policy_weights="lora")
    assert checkpoint_of(_record(folder, 1), forced).lora
    assert not checkpoint_of(_record(folder, 1), GatewaySettings(insecure=True)).lora
