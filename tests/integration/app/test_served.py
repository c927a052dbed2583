"""``GatewayServes`` and the gateway's ``PolicyServed``: a sync run's wait for its update
ends on the gateway's record on the real broker, not on questions to the gateway."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from rllm.app.served import ASK_S, GatewayServes
from rllm.kafka import EventPublisher
from rllm.producers.gateway import GatewaySettings
from rllm.producers.gateway import create_app as gateway_app
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer, start_fake_upstream
from tests.integration.helpers import read_all

NOWHERE = "http://127.0.0.1:9"
"""No gateway answers here: every HTTP question fails, so only the topic can end a wait."""


def _served(gateway: str, version: int, run: str = "r") -> PolicyServed:
    return PolicyServed(
        event_id=f"{gateway}/{run}/v{version}", gateway_id=gateway, run_id=run, version=version
    )


def _until(done: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done()


@pytest.fixture
def served(kafka: KafkaSettings, make_topics: Callable[..., list[str]]) -> Iterator[GatewayServes]:
    """Run ``r``'s ``GatewayServes`` on the test's topics, started, its gateway ``gw-a`` (as
    GET /admin/policy names it) at NOWHERE; closed at the test's end."""
    make_topics()
    served = GatewayServes(NOWHERE, "r", kafka).start()
    served.gateway_id = "gw-a"
    yield served
    served.close()


def test_the_wait_ends_on_its_gateways_record_for_the_version(
    kafka: KafkaSettings, served: GatewayServes
) -> None:
    trainer: Any = SimpleNamespace(failure=None)
    with EventPublisher(kafka) as pub:
        update = PolicyUpdated(event_id="r/v1", run_id="r", version=1, checkpoint_uri="x")
        for record in (update, _served("gw-b", 1), _served("gw-a", 0), _served("gw-a", 1, "s")):
            pub.publish_sync(POLICY_UPDATES, record.run_id, record)
        _until(lambda: len(served.acks) == 3)
        # another gateway's, an older version's and another run's records end nothing
        assert [(a.gateway_id, a.run_id, a.version) for a in served.acks] == [
            ("gw-b", "r", 1),
            ("gw-a", "r", 0),
            ("gw-a", "s", 1),
        ]
        assert not served.acknowledged(1) and not served.acknowledged(0)
        assert not served.wait(1, time.monotonic() + 0.3, trainer)
        late = threading.Timer(0.5, pub.publish_sync, (POLICY_UPDATES, "r", _served("gw-a", 1)))
        late.start()
        began, asked = time.monotonic(), served.asked
        assert served.wait(1, time.monotonic() + 30, trainer)
        waited = time.monotonic() - began
        late.join()
    assert served.acknowledged(1)
    assert 0.4 < waited < 0.5 + 10 * ASK_S, waited
    assert served.asked - asked <= waited / ASK_S + 1  # a question a second at most


def test_a_failed_trainer_ends_the_wait(served: GatewayServes) -> None:
    trainer: Any = SimpleNamespace(failure=None)
    threading.Timer(0.3, setattr, (trainer, "failure", RuntimeError("boom"))).start()
    began = time.monotonic()
    assert not served.wait(3, time.monotonic() + 60, trainer)
    assert time.monotonic() - began < 3 * ASK_S


def test_a_gateway_acknowledges_each_version_of_a_run_it_adopts(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    """An upstream the gateway cannot tell to load (``policy_sync`` log, as for a hosted
    API): it takes what the log names and says so, ``upstream_reports`` false; the wait ends
    on those records."""
    make_topics()
    upstream = start_fake_upstream()
    settings = GatewaySettings(
        upstream_url=upstream.url,
        spool_dir=tmp_path / "spool",
        spool_fsync=False,
        admin_key="k",
        policy_sync="log",
    )
    gateway = ThreadedServer(gateway_app(settings, kafka), lifespan="on")
    trainer: Any = SimpleNamespace(failure=None)
    served = GatewayServes(gateway.url, "r", kafka, admin_key="k").start()
    try:
        admin = {"authorization": "Bearer k"}
        gateway_id = httpx.get(f"{gateway.url}/admin/policy", headers=admin).json()["gateway_id"]
        with EventPublisher(kafka) as pub:
            for version in (0, 1):
                update = PolicyUpdated(
                    event_id=f"r/v{version}", run_id="r", version=version, checkpoint_uri="x"
                )
                pub.publish_sync(POLICY_UPDATES, "r", update)
                assert served.wait(version, time.monotonic() + 30, trainer), version
        assert served.gateway_id == gateway_id
        assert served.asked <= 2, "one question to learn the gateway's id, then the topic"
    finally:
        served.close()
        gateway.stop()
        upstream.stop()
    records = [AvroCodec().decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
    acks = [
        (r.gateway_id, r.run_id, r.version, r.upstream_reports)
        for r in records
        if isinstance(r, PolicyServed)
    ]
    assert acks == [(gateway_id, "r", 0, False), (gateway_id, "r", 1, False)]
