"""Every event type through the real broker: topics, keys, order, limits, failures."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pytest
from confluent_kafka.admin import ConfigResource, NewTopic  # type: ignore[attr-defined]  # confluent-kafka's stubs do not re-export them

from rllm.errors import KafkaUnavailableError, MessageTooLargeError, TopicError
from rllm.kafka import EventPublisher, check_broker, ensure_topics, make_admin
from rllm.schemas.codec import AvroCodec
from rllm.schemas.tokens import pack_logprobs, pack_tokens, unpack_tokens
from rllm.schemas.topics import (
    DEAD_LETTERS,
    EPISODES,
    POLICY_UPDATES,
    SESSION_EVENTS,
    TOPICS,
    TRAJECTORIES,
)
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.samples import DEAD, EPISODE, POLICY, STEP, TRAJECTORY, session_events

codec = AvroCodec()


def test_every_event_type_round_trips_through_the_broker(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics()
    session = session_events("run-1/task:17/0")
    with EventPublisher(kafka) as pub:
        for ev in session:
            pub.publish(SESSION_EVENTS, ev.session_id, ev)
        pub.publish(TRAJECTORIES, "run-1/gsm8k/17", TRAJECTORY)
        pub.publish(EPISODES, "run-1/gsm8k/17", EPISODE)
        pub.publish(POLICY_UPDATES, "run-1", POLICY)
        pub.publish_sync(DEAD_LETTERS, "rllm.session-events", DEAD)

    got = read_all(kafka, kafka.topic(SESSION_EVENTS))
    assert len({m.partition() for m in got}) == 1, "a session's events share one partition"
    decoded = [codec.decode(m.value()) for m in got]
    assert decoded == session
    assert [type(e.payload).__name__ for e in decoded] == [
        "SessionOpened",
        "StepCaptured",
        "StepCaptured",
        "RewardAssigned",
        "SessionClosed",
    ]
    assert {m.key() for m in got} == {b"run-1/task:17/0"}
    assert unpack_tokens(decoded[1].payload.response_token_ids).tolist() == [101, 102, 2]

    for topic, expected, key in [
        (TRAJECTORIES, TRAJECTORY, b"run-1/gsm8k/17"),
        (EPISODES, EPISODE, b"run-1/gsm8k/17"),
        (POLICY_UPDATES, POLICY, b"run-1"),
        (DEAD_LETTERS, DEAD, b"rllm.session-events"),
    ]:
        msgs = read_all(kafka, kafka.topic(topic))
        assert [codec.decode(m.value()) for m in msgs] == [expected], topic
        assert msgs[0].key() == key


def test_sessions_keep_their_order_across_partitions(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=3)
    sessions = {f"sess-{i}": session_events(f"sess-{i}") for i in range(30)}
    with EventPublisher(kafka) as pub:
        for step in range(5):  # interleave the sessions
            for sid, evs in sessions.items():
                pub.publish(SESSION_EVENTS, sid, evs[step])
    got = read_all(kafka, kafka.topic(SESSION_EVENTS))
    assert len(got) == 150
    by_session: dict[str, list[str]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    for m in got:
        ev = codec.decode(m.value())
        by_session[ev.session_id].append(ev.event_id)
        partitions[ev.session_id].add(m.partition())
    assert len({p for ps in partitions.values() for p in ps}) > 1, "keys spread over partitions"
    for sid, evs in sessions.items():
        assert by_session[sid] == [e.event_id for e in evs]
        assert len(partitions[sid]) == 1


def test_topics_have_zstd_a_16_mib_limit_and_keep_everything(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    names = make_topics()
    assert ensure_topics(kafka, TOPICS) == [], "a second call creates nothing"
    admin = make_admin(kafka)
    resources = [ConfigResource("topic", n) for n in names]
    for resource, future in admin.describe_configs(resources).items():
        conf = {k: v.value for k, v in future.result().items()}
        assert conf["compression.type"] == "zstd", resource
        assert conf["max.message.bytes"] == str(16 * 1024 * 1024)
        assert conf["retention.ms"] == "-1"
    meta = admin.list_topics(timeout=10).topics
    assert len(meta[kafka.topic(SESSION_EVENTS)].partitions) == 3
    assert len(meta[kafka.topic(POLICY_UPDATES)].partitions) == 1


def test_partitions_override_leaves_single_partition_topics_single(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    """``up --partitions 3`` spreads the event topics, never the ordered ones: records of
    different runs on rllm.policy-updates must keep the one order they were published in."""
    make_topics(partitions=3)
    counts = _partition_counts(kafka)
    assert counts == {
        SESSION_EVENTS: 3,
        TRAJECTORIES: 3,
        EPISODES: 3,
        POLICY_UPDATES: 1,
        DEAD_LETTERS: 1,
    }


def test_an_existing_policy_topic_with_three_partitions_is_refused(kafka: KafkaSettings) -> None:
    """A stack created before the fix has a 3-partition policy topic: refused with the count
    and what to do, never used as it is."""
    admin = make_admin(kafka)
    name = kafka.topic(POLICY_UPDATES)
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result()
    assert _partition_counts(kafka, [POLICY_UPDATES]) == {POLICY_UPDATES: 3}
    with pytest.raises(TopicError, match=r"has 3 partitions, but it must have exactly 1") as info:
        ensure_topics(kafka, TOPICS)
    assert "rllm-cli down --purge" in str(info.value)
    assert "(which policy version is served)" in str(info.value)
    created = set(admin.list_topics(timeout=10).topics)
    assert kafka.topic(SESSION_EVENTS) not in created, "nothing is created after a refusal"


def _partition_counts(kafka: KafkaSettings, names: list[str] | None = None) -> dict[str, int]:
    """Partitions per topic, once the broker's metadata lists every one of ``names``."""
    names = names or [s.name for s in TOPICS]
    admin = make_admin(kafka)
    deadline = time.monotonic() + 20
    while True:
        meta = admin.list_topics(timeout=10).topics
        counts = {
            n: len(meta[kafka.topic(n)].partitions)
            for n in names
            if kafka.topic(n) in meta and meta[kafka.topic(n)].partitions
        }
        if len(counts) == len(names) or time.monotonic() > deadline:
            return counts
        time.sleep(0.2)


def _step_with_tokens(n: int) -> object:
    return STEP.model_copy(
        update={
            "prompt_token_ids": pack_tokens(range(n)),
            "response_token_ids": pack_tokens(range(n)),
            "response_logprobs": pack_logprobs([-1.0] * n),
        }
    )


def test_a_ten_mib_step_passes_whole(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics()
    ev = session_events("big")[1].model_copy(update={"payload": _step_with_tokens(900_000)})
    with EventPublisher(kafka) as pub:
        pub.publish_sync(SESSION_EVENTS, "big", ev)
    (msg,) = read_all(kafka, kafka.topic(SESSION_EVENTS))
    assert len(msg.value()) > 10_000_000
    back = codec.decode(msg.value())
    assert unpack_tokens(back.payload.prompt_token_ids)[-1] == 899_999


def test_an_event_over_the_limit_is_refused_not_truncated(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics()
    ev = session_events("huge")[1].model_copy(update={"payload": _step_with_tokens(1_500_000)})
    with EventPublisher(kafka) as pub, pytest.raises(MessageTooLargeError) as info:
        pub.publish(SESSION_EVENTS, "huge", ev)
    assert "16777216-byte limit" in str(info.value)
    assert "SessionEvent" in str(info.value)
    assert read_all(kafka, kafka.topic(SESSION_EVENTS)) == []


def test_an_unreachable_broker_is_a_clear_error() -> None:
    dead = KafkaSettings(bootstrap_servers="127.0.0.1:1", request_timeout_s=2)
    with pytest.raises(KafkaUnavailableError, match=r"127\.0\.0\.1:1"):
        check_broker(dead, timeout_s=2)
    with EventPublisher(dead) as pub, pytest.raises(KafkaUnavailableError, match="unreachable"):
        pub.publish_sync(SESSION_EVENTS, "k", session_events()[0])
