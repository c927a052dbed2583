"""Small helpers for integration tests: read a topic to its end, or a reader's next
records; how far a consumer group has committed, and how many members it has; wait until a
condition holds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from rllm.kafka import ConsumedRecord, TopicReader, make_admin, make_consumer
from rllm.settings import KafkaSettings


def each_record(
    settings: KafkaSettings, full_topic: str, timeout_s: float = 20.0
) -> Iterator[Message]:
    """Every record of a topic as it is read (each partition's in offset order), until
    every partition's end (asserted reached within ``timeout_s``)."""
    consumer = make_consumer(
        settings, f"test-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}
    )
    try:
        meta = consumer.list_topics(full_topic, timeout=10).topics[full_topic]
        parts = sorted(meta.partitions)
        consumer.assign([TopicPartition(full_topic, p, OFFSET_BEGINNING) for p in parts])
        pending = set(parts)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                pending.discard(msg.partition())
                continue
            yield msg
        assert not pending, f"partitions {pending} of {full_topic} did not reach their end"
    finally:
        consumer.close()


def read_all(settings: KafkaSettings, full_topic: str, timeout_s: float = 20.0) -> list[Message]:
    """Every record of a topic, partition by partition in offset order."""
    out = list(each_record(settings, full_topic, timeout_s))
    return sorted(out, key=lambda m: (m.partition(), m.offset()))


_NOT_YET = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,  # a broker just started
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.GROUP_ID_NOT_FOUND,  # nobody joined yet
}


def members(kafka: KafkaSettings, group: str) -> int:
    """Members of consumer group ``group`` once it is stable (0 while it rebalances, or
    while its coordinator is not ready to say)."""
    admin = make_admin(kafka)  # held until the answer: a dropped client never answers
    try:
        found = admin.describe_consumer_groups([group])[group].result(timeout=10)
    except KafkaException as exc:
        if exc.args[0].code() in _NOT_YET:
            return 0
        raise
    return len(found.members) if found.state == ConsumerGroupState.STABLE else 0


def until(
    what: str, ready: Callable[[], bool], timeout_s: float = 60.0, every_s: float = 0.1
) -> None:
    """Poll ``ready`` every ``every_s`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(every_s)


def read_records(reader: TopicReader, n: int) -> list[ConsumedRecord]:
    """The next ``n`` records ``reader`` returns, read a second at a time until they came."""
    got: list[ConsumedRecord] = []
    while len(got) < n:
        got.extend(reader.read(n - len(got), timeout_s=1.0))
    return got


def fake_model_setup(upstream_url: str) -> list[str]:
    """``rllm-cli`` arguments that make the profile ``fake``: a vLLM server at the fake
    upstream ``upstream_url`` serving ``fake-model``, without prompts."""
    return [
        *("model", "setup", "--provider", "vllm", "--name", "fake", "--model", "fake-model"),
        *("--base-url", f"{upstream_url}/v1", "--no-input"),
    ]
