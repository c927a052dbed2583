"""``rllm.kafka.end_offsets`` and ``group_lag`` on the real broker: per partition, what a
topic holds and what a consumer group has not committed yet, and ``rllm-cli topics list``
showing the records."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.errors import TopicError
from rllm.kafka import EventPublisher, TopicReader, end_offsets, group_lag
from rllm.schemas.topics import EPISODES
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_records
from tests.unit.consumers.trainer.factory import episode


def test_end_offsets_and_a_group_s_lag_per_partition(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=3)
    topic = kafka.topic(EPISODES)
    with EventPublisher(kafka) as pub:
        for partition, n in ((0, 5), (2, 2)):
            for i in range(n):
                value = pub.codec.encode(episode(f"p{partition}-{i}"), topic=topic)
                pub.publish_bytes(EPISODES, f"k{i}", value, partition=partition).result(30)
    assert end_offsets(kafka, topic) == {0: 5, 1: 0, 2: 2}
    group = f"test-{uuid.uuid4().hex[:8]}"
    assert group_lag(kafka, group, topic) == {0: 5, 2: 2}  # nothing committed yet
    with TopicReader(kafka, group, name="test-admin") as reader:
        reader.assign(topic, [0], "committed")
        read_records(reader, 3)
        reader.commit()  # offsets 0-2 of partition 0
    assert group_lag(kafka, group, topic) == {0: 2, 2: 2}


def test_a_missing_topic_is_named(kafka: KafkaSettings) -> None:
    missing = kafka.topic("no-such-topic")
    with pytest.raises(TopicError, match=f"topic '{missing}' does not exist"):
        end_offsets(kafka, missing)
    with pytest.raises(TopicError, match=f"topic '{missing}' does not exist"):
        group_lag(kafka, "g", missing)


def test_topics_list_shows_partitions_and_records(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    with EventPublisher(kafka) as pub:
        for i in range(3):
            pub.publish(EPISODES, f"k{i}", episode(f"e{i}")).result(timeout=30)
    args = ["topics", "list", "-b", kafka.bootstrap_servers, "--topic-prefix", kafka.topic_prefix]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    (line,) = [ln for ln in out.output.splitlines() if kafka.topic(EPISODES) in ln]
    assert line.rstrip().endswith("1 partitions, 3 records")
