"""Several upstream replicas end to end (issue 36 item 2): one gateway in front of two real
local model servers (tiny random models) on the real broker. A session sticks to the
replica of its first call, the next session goes to the other one, a version is served
(``/admin/policy``, ``PolicyServed``) only once both servers confirmed it while each step
carries what its own server served, and a replica stopped mid-run has its session moved to
the other one with a note in its next step."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rllm.kafka import EventPublisher
from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import StepCaptured
from rllm.serving.app import create_app as serving_app
from rllm.serving.engine import Engine
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import read_all, until
from tests.integration.producers.gateway.fixtures import ADMIN, Events


@pytest.fixture
def engines(tmp_path: Path) -> list[Engine]:
    """Two engines of the same tiny random model (two replicas of one model)."""
    folder = str(tiny_model_dir(tmp_path / "tiny"))
    return [Engine(load_model(folder)), Engine(load_model(folder))]


@pytest.fixture
def servers(engines: list[Engine]) -> Iterator[list[ThreadedServer]]:
    """A local model server per engine (a test stops one to take it down)."""
    started = [ThreadedServer(serving_app(e, model_name="tiny"), lifespan="on") for e in engines]
    yield started
    for server in started:
        if server._thread.is_alive():
            server.stop()


def _open(gw: ThreadedServer, sid: str) -> dict[str, Any]:
    info: dict[str, Any] = httpx.post(
        f"{gw.url}/sessions", json={"session_id": sid}, headers=ADMIN
    ).json()
    return info


def _call(session: dict[str, Any]) -> None:
    r = httpx.post(
        f"{session['base_url']}/completions",
        json={"model": "tiny", "prompt": "abc", "max_tokens": 2},
        headers={"authorization": f"Bearer {session['api_key']}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text


def _steps(session_events: Events, sid: str) -> list[tuple[str, int, str | None]]:
    """Each step's replica, policy version and move note, in order."""
    steps = [e.payload for k, e in session_events() if k == sid]
    return [
        (s.upstream, s.policy_version, json.loads(s.sampling_params_json).get("replica_moved"))
        for s in steps
        if isinstance(s, StepCaptured)
    ]


def _served(kafka: KafkaSettings) -> list[int]:
    codec = AvroCodec()
    records = (codec.decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES)))
    return [r.version for r in records if isinstance(r, PolicyServed)]


def test_sessions_stick_move_when_a_replica_dies_and_a_version_waits_for_both(
    start_gateway: Callable[..., ThreadedServer],
    servers: list[ThreadedServer],
    engines: list[Engine],
    kafka: KafkaSettings,
    session_events: Events,
    tmp_path: Path,
) -> None:
    a, b = servers
    follow_a = PolicyFollower(engines[0], kafka, poll_s=0.2).start()
    follow_b = PolicyFollower(engines[1], kafka, poll_s=0.2)  # b follows the log later
    gw = start_gateway(
        upstream_urls=(a.url, b.url),
        policy_sync="local",
        follow_policy_updates=True,
        replica_probe_s=0.2,
    )
    policy = lambda: httpx.get(f"{gw.url}/admin/policy", headers=ADMIN).json()  # noqa: E731
    try:
        # stickiness, then the least loaded replica for a new session
        one, two = _open(gw, "one"), _open(gw, "two")
        _call(one)
        _call(one)
        _call(two)
        assert _steps(session_events, "one") == [(a.url, 0, None), (a.url, 0, None)]
        assert _steps(session_events, "two") == [(b.url, 0, None)]
        assert [(r["url"], r["sessions"]) for r in policy()["replicas"]] == [
            (a.url, 1),
            (b.url, 1),
        ]

        # v1: a loads it, b does not yet; each step carries its own server's version
        load_model(str(tiny_model_dir(tmp_path / "tiny"))).model.save_pretrained(tmp_path / "v1")
        update = PolicyUpdated(
            event_id=uuid.uuid4().hex,
            run_id="r",
            version=1,
            checkpoint_uri=(tmp_path / "v1").as_uri(),
        )
        with EventPublisher(kafka) as pub:
            pub.publish_sync(POLICY_UPDATES, "r", update)
        until("a never served v1", lambda: policy()["replicas"][0]["policy_version"] == 1)
        now = policy()
        assert (now["policy_version"], now["replicas"][1]["policy_version"]) == (0, 0)
        assert now["announced_policy_version"] == 1
        _call(one)
        _call(two)
        assert _steps(session_events, "one")[-1] == (a.url, 1, None)
        assert _steps(session_events, "two")[-1] == (b.url, 0, None)
        assert _served(kafka) == [], "not served while b has not confirmed it"

        # b loads it too: now the gateway serves v1 and says so once
        follow_b.start()
        until("the gateway never served v1", lambda: policy()["policy_version"] == 1)
        assert [r["policy_version"] for r in policy()["replicas"]] == [1, 1]
        until("no PolicyServed for v1", lambda: _served(kafka) == [1])

        # a goes down: its session moves to b, and its next step says so
        a.stop()
        _call(one)
        moved = _steps(session_events, "one")[-1]
        assert moved[:2] == (b.url, 1)
        assert moved[2] is not None and f"replica {a.url} was taken out" in moved[2]
        assert f"moved to {b.url}" in moved[2]
        _call(one)
        assert _steps(session_events, "one")[-1] == (b.url, 1, None), "noted once"
        replicas = policy()["replicas"]
        assert (replicas[0]["live"], replicas[1]["live"]) == (False, True)
        assert f"upstream {a.url} unreachable" in replicas[0]["down_reason"]
        assert [r["sessions"] for r in replicas] == [0, 2]
        metrics = httpx.get(f"{gw.url}/metrics", headers=ADMIN).text
        assert "rllm_gateway_live_replicas 1" in metrics
        three = _open(gw, "three")
        _call(three)
        assert _steps(session_events, "three") == [(b.url, 1, None)]
        assert len(_steps(session_events, "one")) == 5, "no failed step for the move"
        models = httpx.get(
            f"{one['base_url']}/models", headers={"authorization": f"Bearer {one['api_key']}"}
        )
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "tiny"
    finally:
        follow_a.stop()
        follow_b.stop()
