"""Policy sync end to end (issue 36 item 1): a gateway in front of a fake vLLM has it load
each LoRA checkpoint ``rllm.policy-updates`` names; steps keep the version served until vLLM
lists the adapter, then carry the new version and call it by name; a refused load keeps the
old version, and a trainer's wait for it ends with vLLM's reason instead of timing out."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from rllm.app.served import GatewayServes
from rllm.schemas.types import SessionOpened, StepCaptured
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.fakes_training.vllm import FakeVllm
from tests.integration.helpers import until
from tests.integration.producers.gateway.fixtures import ADMIN, Events
from tests.integration.producers.gateway.policy_steps import one_completion, publish_policy


def _until(what: str, ready: Callable[[], bool], timeout_s: float = 30.0) -> None:
    until(what, ready, timeout_s, every_s=0.05)


def _adapter(tmp_path: Path, version: int) -> Path:
    folder = tmp_path / "r" / f"v{version:06d}"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    return folder


def _publish(kafka: KafkaSettings, version: int, folder: Path) -> None:
    publish_policy(kafka, version, folder.as_uri())


def _rollout(gw: ThreadedServer, sid: str) -> None:
    one_completion(gw, sid, model="fake-model", timeout_s=30)


def _stamps(session_events: Events, sid: str) -> list[tuple[int, str]]:
    """SessionOpened's policy version, then each step's with its model."""
    payloads: list[Any] = [e.payload for k, e in session_events() if k == sid]
    return [
        (p.policy_version, getattr(p, "model", ""))
        for p in payloads
        if isinstance(p, SessionOpened | StepCaptured)
    ]


def test_steps_carry_a_version_only_once_vllm_serves_it(
    start_gateway: Callable[..., ThreadedServer],
    kafka: KafkaSettings,
    session_events: Events,
    tmp_path: Path,
) -> None:
    fake = FakeVllm()
    fake.gate = threading.Event()
    server = fake.serve()
    try:
        gw = start_gateway(upstream_url=server.url, follow_policy_updates=True)
        policy = lambda: httpx.get(f"{gw.url}/admin/policy", headers=ADMIN).json()  # noqa: E731
        _publish(kafka, 1, _adapter(tmp_path, 1))
        _until("vLLM was never asked to load v1", lambda: fake.loading == 1)
        _rollout(gw, "loading")
        assert [v for v, _ in _stamps(session_events, "loading")] == [0, 0]
        assert fake.upstream.requests[-1]["model"] == "fake-model"
        fake.gate.set()
        _until("the gateway never took v1", lambda: policy()["policy_version"] == 1)
        _rollout(gw, "loaded")
        assert [v for v, _ in _stamps(session_events, "loaded")] == [1, 1]
        assert fake.upstream.requests[-1]["model"] == "r-v1", "sent to the adapter"

        # a refused load: the old version stays, and a trainer's wait says why at once
        bad = _adapter(tmp_path, 2)
        fake.refuse.add(str(bad))
        _publish(kafka, 2, bad)
        _until("the refusal never showed", lambda: policy()["sync_error"] is not None)
        assert policy()["sync_error"]["version"] == 2
        _rollout(gw, "refused")
        assert [v for v, _ in _stamps(session_events, "refused")] == [1, 1]
        served = GatewayServes(gw.url, "r", kafka)
        trainer: Any = SimpleNamespace(failure=None)
        began = time.monotonic()
        try:
            assert not served.wait(2, time.monotonic() + 60, trainer)
        finally:
            served.close()
        assert time.monotonic() - began < 10, "the wait ran on instead of ending"
        assert served.refused is not None and "No adapter found" in served.refused
    finally:
        server.stop()
