"""``rllm-cli up --brokers 3``'s cluster for real: three KRaft nodes from ``infra/kafka``,
every topic with 3 replicas and 2 in sync, and events published while one node is
SIGKILLed and restarted all acknowledged, then read back once each and in order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]  # confluent-kafka's stubs do not re-export it

from rllm.infra import LocalCluster, stack_down, stack_status, stack_up
from rllm.kafka import EventPublisher, check_broker, ensure_topics, make_admin
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS, TOPICS
from rllm.settings import KafkaSettings, StackSettings
from tests.integration.helpers import read_all
from tests.ports import free_ports
from tests.samples import session_events


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackSettings]:
    """``up --brokers 3`` with no services, in a fresh home; ``down --purge`` after."""
    home: Path = tmp_path_factory.mktemp("cluster-home")
    settings = StackSettings(
        home=home, kafka_port=free_ports(6), kafka_brokers=3, services="", kafka_heap="384m"
    )
    try:
        stack_up(settings)
        yield settings
    finally:
        stack_down(settings, purge=True)


def test_up_with_three_brokers_replicates_every_topic(stack: StackSettings) -> None:
    port = stack.kafka_port
    assert stack.bootstrap_servers == f"127.0.0.1:{port},127.0.0.1:{port + 2},127.0.0.1:{port + 4}"
    kafka = KafkaSettings(bootstrap_servers=stack.bootstrap_servers, replication_factor=3)
    assert check_broker(kafka) == 3
    # down and status find the cluster from the count up recorded, without --brokers
    again = StackSettings(home=stack.home, kafka_port=port, services="")
    assert (again.brokers, again.kafka_data_dir) == (3, stack.home / "kafka-cluster")
    [status] = stack_status(again)
    assert status.running and status.detail.startswith("3 brokers of 3, 3 replica(s) per topic")

    admin = make_admin(kafka)
    meta = admin.list_topics(timeout=10).topics
    names = [spec.name for spec in TOPICS]
    for name in names:
        assert {len(p.replicas) for p in meta[name].partitions.values()} == {3}, name
    configs = admin.describe_configs([ConfigResource("topic", n) for n in names])
    for resource, future in configs.items():
        assert future.result()["min.insync.replicas"].value == "2", resource


def test_a_killed_broker_loses_no_acknowledged_event(stack: StackSettings) -> None:
    kafka = KafkaSettings(
        bootstrap_servers=stack.bootstrap_servers, replication_factor=3, topic_prefix="kill."
    )
    cluster = LocalCluster(stack.kafka_port, stack.kafka_data_dir, 3, stack.kafka_heap)
    ensure_topics(kafka, partitions=3)
    sessions = [f"s-{i}" for i in range(60)]
    sent = []
    with EventPublisher(kafka) as pub:
        futures = []
        for round_ in range(5):
            if round_ == 2:  # a node dies mid-stream: leaders move, writes go on with 2 in sync
                cluster.kill(2)
            if round_ == 4:
                cluster.restart(2)
            for sid in sessions:
                event = session_events(sid)[round_]
                sent.append(event)
                futures.append(pub.publish(SESSION_EVENTS, sid, event))
            time.sleep(0.2)
        for future in futures:
            future.result(timeout=120)  # every event acknowledged by two replicas
    assert cluster.is_running()

    codec = AvroCodec()
    got = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(SESSION_EVENTS), 60)]
    assert len(got) == len(sent) == 300
    assert len({e.event_id for e in got}) == 300  # no duplicate from a retried produce
    for sid in sessions:  # each session's events in the order they were sent
        assert [e for e in got if e.session_id == sid] == session_events(sid)
