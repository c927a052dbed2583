"""Topic admin: create the design's topics (idempotently, with their settings), delete
topics, list what the broker holds, and how far each partition and each consumer group
has come.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # confluent-kafka's stubs omit NewTopic

from rllm.errors import KafkaUnavailableError, TopicError
from rllm.kafka.clients import make_admin, make_consumer
from rllm.kafka.errors import is_already_exists, is_unknown_topic, kafka_errors, translate
from rllm.schemas.topics import POLICY_UPDATES, TOPICS, TopicSpec
from rllm.settings import KafkaSettings

__all__ = [
    "active_groups",
    "created_partitions",
    "delete_topics",
    "end_offsets",
    "ensure_topics",
    "group_lag",
    "list_topics",
]


def list_topics(settings: KafkaSettings, timeout_s: float | None = None) -> dict[str, int]:
    """Every topic on the broker (full names) with its partition count.

    Raises:
        KafkaUnavailableError: if no broker answers within ``timeout_s`` (default the
            request timeout).
    """
    timeout = settings.request_timeout_s if timeout_s is None else timeout_s
    with kafka_errors(f"listing topics on {settings.bootstrap_servers}"):
        topics = make_admin(settings).list_topics(timeout=timeout).topics
    return {name: len(meta.partitions or {}) for name, meta in topics.items()}


def created_partitions(spec: TopicSpec, partitions: int | None = None) -> int:
    """The partition count ``spec``'s topic is created with. ``partitions`` (``rllm-cli up
    --partitions``) overrides the default of multi-partition topics only: a topic whose spec
    says one partition needs one total order (``rllm.policy-updates``: the versions of every
    run, in the order they were published) and stays single."""
    if spec.partitions == 1:
        return 1
    return partitions or spec.partitions


def ensure_topics(
    settings: KafkaSettings,
    specs: Iterable[TopicSpec] = TOPICS,
    partitions: int | None = None,
) -> list[str]:
    """Create the topics that do not exist yet; return the names created. ``partitions``
    applies to multi-partition topics only (see ``created_partitions``).

    Raises:
        TopicError: if the broker refuses a topic, or an existing single-partition topic
            has more than one partition (its records would have no order).
        KafkaUnavailableError: if no broker answers.
    """
    admin = make_admin(settings)
    specs = list(specs)
    try:
        existing = admin.list_topics(timeout=settings.request_timeout_s).topics
    except KafkaException as exc:
        raise translate(exc, f"listing topics on {settings.bootstrap_servers}") from exc
    for s in specs:
        meta = existing.get(settings.topic(s.name))
        have = len(meta.partitions) if meta is not None and meta.partitions else 0
        if s.partitions == 1 and have > 1:
            why = " (which policy version is served)" if s.name == POLICY_UPDATES else ""
            raise TopicError(
                f"topic {settings.topic(s.name)} has {have} partitions, but it must have "
                f"exactly 1: its records need one order{why}, and across {have} partitions "
                f"they have none; delete the topic (or start from an empty broker: rllm-cli "
                f"down --purge) and run this again to create it with 1 partition"
            )
    wanted = [
        NewTopic(
            settings.topic(s.name),
            num_partitions=created_partitions(s, partitions),
            replication_factor=settings.replication_factor,
            config={**s.config, "min.insync.replicas": str(settings.min_insync)},
        )
        for s in specs
        if settings.topic(s.name) not in existing
    ]
    if not wanted:
        return []
    created = []
    for name, future in admin.create_topics(
        wanted, request_timeout=settings.request_timeout_s
    ).items():
        try:
            future.result()
            created.append(name)
        except KafkaException as exc:
            if is_already_exists(exc):
                continue
            raise translate(exc, f"creating topic {name}") from exc
    return created


def delete_topics(settings: KafkaSettings, names: Iterable[str]) -> None:
    """Delete topics by full name; missing ones are ignored."""
    admin = make_admin(settings)
    for name, future in admin.delete_topics(list(names), request_timeout=30).items():
        try:
            future.result()
        except KafkaException as exc:
            if is_unknown_topic(exc):
                continue
            raise translate(exc, f"deleting topic {name}") from exc


def _partitions(consumer: Consumer, topic: str, timeout_s: float) -> list[TopicPartition]:
    meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise TopicError(f"topic {topic!r} does not exist on the broker")
    return [TopicPartition(topic, p) for p in sorted(meta.partitions)]


def end_offsets(settings: KafkaSettings, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """Each partition's end offset (high watermark) of ``topic`` (a full name): on a topic
    written outside transactions and never compacted, the records it holds.

    Raises:
        TopicError: naming the topic when the broker does not have it.
        KafkaUnavailableError: if no broker answers.
    """
    with kafka_errors(f"reading the end offsets of {topic}"):
        consumer = make_consumer(settings, "rllm-offsets")
        try:
            parts = _partitions(consumer, topic, timeout_s)
            return {
                tp.partition: consumer.get_watermark_offsets(tp, timeout=timeout_s)[1]
                for tp in parts
            }
        finally:
            consumer.close()


def group_lag(
    settings: KafkaSettings, group: str, topic: str, timeout_s: float = 10.0
) -> dict[int, int]:
    """Records of each partition of ``topic`` (a full name) that consumer group ``group``
    has not committed yet; a partition caught up is left out (so ``{}``: caught up). Only
    for a topic written outside transactions: a transaction's commit marker takes an offset
    that no consumed record reaches.

    Raises:
        TopicError: naming the topic when the broker does not have it.
        KafkaUnavailableError: if no broker answers.
    """
    with kafka_errors(f"reading group {group}'s lag on {topic}"):
        consumer = make_consumer(settings, group)
        try:
            parts = _partitions(consumer, topic, timeout_s)
            done = {
                tp.partition: max(tp.offset, 0)
                for tp in consumer.committed(parts, timeout=timeout_s)
            }
            ends = {
                tp.partition: consumer.get_watermark_offsets(tp, timeout=timeout_s)[1]
                for tp in parts
            }
        finally:
            consumer.close()
    return {p: end - done.get(p, 0) for p, end in ends.items() if end > done.get(p, 0)}


def active_groups(
    settings: KafkaSettings, prefix: str, timeout_s: float | None = None
) -> list[str]:
    """The consumer groups whose id starts with ``prefix`` and that have members now
    (stable or rebalancing), sorted; a group whose consumers all left is not listed.

    Raises:
        KafkaUnavailableError: if no broker answers within ``timeout_s`` (default the
            request timeout).
    """
    from confluent_kafka import ConsumerGroupState

    timeout_s = settings.request_timeout_s if timeout_s is None else timeout_s
    live = {
        ConsumerGroupState.STABLE,
        ConsumerGroupState.PREPARING_REBALANCING,
        ConsumerGroupState.COMPLETING_REBALANCING,
    }
    with kafka_errors(f"listing the consumer groups on {settings.bootstrap_servers}"):
        admin = make_admin(settings)  # held until the answer: a collected client never answers
        future = admin.list_consumer_groups(request_timeout=timeout_s)
        try:
            listed = future.result(timeout=timeout_s).valid
        except TimeoutError as exc:
            raise KafkaUnavailableError(
                f"the broker at {settings.bootstrap_servers} did not list its consumer "
                f"groups within {timeout_s:.0f} s"
            ) from exc
    return sorted(g.group_id for g in listed if g.group_id.startswith(prefix) and g.state in live)
