"""``rllm.kafka.TopicReader`` on the real broker: each record decoded or dead-lettered with
the reason, in each partition's order; commits store the offsets after what was returned
(or a checkpoint's) and a new reader of the group resumes there; ``end`` reads only
records that arrive later."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from rllm.kafka import ConsumedRecord, EventPublisher, TopicReader, dead_letters_to
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import DEAD_LETTERS, EPISODES
from rllm.schemas.types import DeadLetter, EpisodeAssembled
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all, read_records
from tests.unit.consumers.trainer.factory import episode

GARBAGE = b"\xc3\x01not an avro record"


def _policy(version: int) -> PolicyUpdated:
    return PolicyUpdated(
        event_id=f"run/v{version}", run_id="run", version=version, checkpoint_uri="file:///x"
    )


def _next_record(reader: TopicReader) -> ConsumedRecord:
    """The next record ``reader`` polls, however many polls come back empty first."""
    rec = None
    while rec is None:
        rec = reader.poll(1.0)
    return rec


def _read_to_end(reader: TopicReader, topic: str, partitions: list[int]) -> list[ConsumedRecord]:
    """Everything up to each partition's end (the reader needs ``enable.partition.eof``)."""
    out: list[ConsumedRecord] = []
    deadline = time.monotonic() + 30
    while {(topic, p) for p in partitions} - reader.ended:
        assert time.monotonic() < deadline, f"only {len(out)} records before the deadline"
        out.extend(reader.read(100, timeout_s=0.5))
    return out


def test_each_record_is_decoded_or_dead_lettered_with_its_reason_in_partition_order(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=2)
    topic = kafka.topic(EPISODES)
    with EventPublisher(kafka) as pub:
        codec = pub.codec
        sent = [  # (partition, key, value)
            (0, b"k0", codec.encode(episode("a0"), topic=topic)),
            (0, b"k1", GARBAGE),
            (0, b"k2", codec.encode(episode("a2"), topic=topic)),
            (0, b"k3", codec.encode(_policy(3), topic=topic)),  # valid, but not an episode
            (1, b"k4", codec.encode(episode("b0"), topic=topic)),
            (1, b"k5", codec.encode(episode("b1"), topic=topic)),
        ]
        for partition, key, value in sent:
            pub.publish_bytes(EPISODES, key, value, partition=partition).result(timeout=30)
        reader = TopicReader(
            kafka,
            f"test-{uuid.uuid4().hex[:8]}",
            name="test-reader",
            expect=EpisodeAssembled,
            dead_letter=dead_letters_to(pub),
            config={"enable.partition.eof": True},
        )
        try:
            parts = reader.partitions(topic)
            assert parts == [0, 1]
            reader.assign(topic, parts, "beginning")
            got = _read_to_end(reader, topic, parts)
        finally:
            reader.close()

    by_part = {p: [r for r in got if r.partition == p] for p in (0, 1)}
    assert [r.offset for r in by_part[0]] == [0, 1, 2, 3]
    assert [r.offset for r in by_part[1]] == [0, 1]
    assert [r.event.event_id if r.event else None for r in by_part[0]] == ["a0", None, "a2", None]
    assert [r.event.event_id for r in by_part[1]] == ["b0", "b1"]
    assert [(r.key, r.value) for r in by_part[0]] == [(k, v) for p, k, v in sent if p == 0]
    bad, wrong = by_part[0][1].error, by_part[0][3].error
    assert type(bad).__name__ == "UnknownSchemaError"
    assert type(wrong).__name__ == "SchemaError"
    assert str(wrong) == f"expected EpisodeAssembled on {topic}, got PolicyUpdated"

    letters = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(DEAD_LETTERS))]
    assert all(isinstance(x, DeadLetter) for x in letters)
    assert [(x.source_topic, x.source_partition, x.source_offset) for x in letters] == [
        (topic, 0, 1),
        (topic, 0, 3),
    ]
    assert [x.reason for x in letters] == [str(bad), str(wrong)]
    assert [x.error_type for x in letters] == ["UnknownSchemaError", "SchemaError"]
    assert [(x.key, x.value) for x in letters] == [(b"k1", GARBAGE), (sent[3][1], sent[3][2])]
    assert {x.consumer for x in letters} == {"test-reader"}


def test_a_commit_stores_the_offsets_after_what_was_returned_and_the_group_resumes_there(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    topic = kafka.topic(EPISODES)
    with EventPublisher(kafka) as pub:
        for i in range(6):
            value = GARBAGE if i == 2 else pub.codec.encode(episode(f"e{i}"), topic=topic)
            pub.publish_bytes(EPISODES, f"k{i}", value, partition=0).result(timeout=30)
    group = f"test-{uuid.uuid4().hex[:8]}"

    def reader() -> TopicReader:
        r = TopicReader(kafka, group, name="test-reader")
        r.assign(topic, r.partitions(topic), "committed")
        return r

    with reader() as first:
        got = read_records(first, 4)
        assert [r.offset for r in got] == [0, 1, 2, 3]
        assert got[2].error is not None and got[2].event is None  # refused, still counted
        assert first.positions == {topic: {0: 4}}
        first.commit()
        assert first.positions == {}

    with reader() as second:
        rec = _next_record(second)
        assert (rec.offset, rec.event.event_id) == (4, "e4")
        # a checkpoint's offsets (partition keys as strings) replace what was read
        second.commit({topic: {"0": 1}})

    with reader() as third:
        rec = _next_record(third)
        assert (rec.offset, rec.event.event_id) == (1, "e1")


def test_end_reads_only_records_that_arrive_later_and_a_missing_topic_has_no_partitions(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    topic = kafka.topic(EPISODES)
    with EventPublisher(kafka) as pub:
        for i in range(3):
            pub.publish_sync(EPISODES, f"old{i}", episode(f"old{i}"))
        reader = TopicReader(kafka, f"test-{uuid.uuid4().hex[:8]}", name="test-reader")
        try:
            assert reader.partitions(kafka.topic("no-such-topic")) == []
            reader.assign(topic, reader.partitions(topic), "end")
            pub.publish_sync(EPISODES, "new", episode("new"))  # right after: not missed
            deadline = time.monotonic() + 30
            got: list[ConsumedRecord] = []
            while not got:
                assert time.monotonic() < deadline, "the new record never came"
                got = reader.read(10, timeout_s=0.5)
        finally:
            reader.close()
    assert [(r.offset, r.event.event_id) for r in got] == [(3, "new")]
