"""Kafka stopped mid-run: no step lost, the spool drains in order when Kafka is back, and a
restarted gateway drains what the previous run spooled. Uses a broker of its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from rllm.infra.broker import LocalBroker
from rllm.kafka import ensure_topics
from rllm.producers.gateway import GatewaySettings, create_app
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS, TOPICS
from rllm.schemas.types import SessionClosed, SessionOpened, StepCaptured
from rllm.settings import KafkaSettings
from tests.fakes.upstream import RunningUpstream, ThreadedServer
from tests.integration.helpers import read_all
from tests.integration.producers.gateway.fixtures import ADMIN, ADMIN_KEY
from tests.ports import free_broker_port


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[LocalBroker]:
    broker = LocalBroker(free_broker_port(), tmp_path / "kafka")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop(purge=True)


def _wait_depth(url: str, depth: int, timeout_s: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while True:
        health: dict[str, object] = httpx.get(f"{url}/health").json()
        if health["spool_depth"] == depth or time.monotonic() > deadline:
            return health
        time.sleep(0.2)


def _chat(base: str, text: str) -> str:
    client = openai.OpenAI(base_url=base, api_key=ADMIN_KEY, max_retries=0, timeout=60)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    client.close()
    return reply.choices[0].message.content or ""


def test_kafka_down_spools_and_drains_in_order_also_after_restart(
    own_broker: LocalBroker, upstream: RunningUpstream, tmp_path: Path
) -> None:
    kafka = KafkaSettings(
        bootstrap_servers=own_broker.bootstrap_servers, topic_prefix="spool.", request_timeout_s=10
    )
    ensure_topics(kafka, TOPICS, partitions=2)
    settings = GatewaySettings(
        upstream_url=upstream.url,
        spool_dir=tmp_path / "spool",
        ack_timeout_s=2,
        drain_interval_s=0.3,
        follow_policy_updates=False,
        admin_key=ADMIN_KEY,
    )
    gw = ThreadedServer(create_app(settings, kafka), lifespan="on")
    try:
        base = f"{gw.url}/sessions/a/v1"
        assert _chat(base, "one")
        own_broker.stop()
        assert [_chat(base, t) for t in ("two", "three", "four")]
        health = httpx.get(f"{gw.url}/health").json()
        assert health["spool_depth"] == 3 and health["spooling"] is True
        assert "rllm_gateway_spool_depth 3" in httpx.get(f"{gw.url}/metrics").text
        own_broker.start()
        assert _wait_depth(gw.url, 0)["spool_depth"] == 0
        assert httpx.get(f"{gw.url}/health").json()["spooling"] is False
        assert _chat(base, "five")
        # second outage, and the gateway stops before Kafka is back
        own_broker.stop()
        assert _chat(base, "six")
        httpx.post(f"{gw.url}/sessions/a/close", json={"status": "ok"}, headers=ADMIN, timeout=60)
        assert httpx.get(f"{gw.url}/health").json()["spool_depth"] == 2
    finally:
        gw.stop()
    own_broker.start()
    gw2 = ThreadedServer(create_app(settings, kafka), lifespan="on")
    try:
        assert _wait_depth(gw2.url, 0)["spool_depth"] == 0
    finally:
        gw2.stop()

    codec = AvroCodec()
    events = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(SESSION_EVENTS))]
    assert {e.session_id for e in events} == {"a"}
    payloads = [e.payload for e in events]
    assert isinstance(payloads[0], SessionOpened) and isinstance(payloads[-1], SessionClosed)
    steps = [p for p in payloads if isinstance(p, StepCaptured)]
    assert [s.step_index for s in steps] == [0, 1, 2, 3, 4, 5]
    assert len({e.event_id for e in events}) == len(events) == 8
    assert payloads[-1].num_steps == 6
