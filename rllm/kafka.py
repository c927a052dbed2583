"""The one Kafka module: client factories with our defaults, topic admin, error mapping,
and an event publisher (per-record futures, or ``Acks`` counted per batch for high-rate
producers such as the processors). Components write no Kafka plumbing of their own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from rllm.errors import (
    KafkaError,
    KafkaUnavailableError,
    MessageTooLargeError,
    RllmError,
    TopicError,
)
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import POLICY_UPDATES, TOPICS, TopicSpec, topic_spec
from rllm.schemas.types import DeadLetter, PolicyUpdated, _Record
from rllm.settings import KafkaSettings

__all__ = [
    "Acks",
    "EventPublisher",
    "PolicyFollower",
    "check_broker",
    "consumer_config",
    "created_partitions",
    "dead_letter_for",
    "delete_topics",
    "ensure_topics",
    "kafka_errors",
    "make_admin",
    "make_codec",
    "make_consumer",
    "make_producer",
    "producer_config",
    "translate",
]

log = logging.getLogger(__name__)

_KE = confluent_kafka.KafkaError
_UNAVAILABLE = {
    _KE._TRANSPORT,
    _KE._ALL_BROKERS_DOWN,
    _KE._TIMED_OUT,
    _KE._MSG_TIMED_OUT,
    _KE._RESOLVE,
    # a commit while the broker is down waits ~46 s for the group coordinator, then fails
    # with these: the broker is away, not the request wrong
    _KE._WAIT_COORD,
    _KE.COORDINATOR_NOT_AVAILABLE,
    _KE.NOT_COORDINATOR,
    _KE.COORDINATOR_LOAD_IN_PROGRESS,
}
_TOO_LARGE = {_KE.MSG_SIZE_TOO_LARGE, _KE.RECORD_LIST_TOO_LARGE, _KE.INVALID_MSG_SIZE}


def translate(err: Any, context: str) -> KafkaError:
    """Map a confluent-kafka ``KafkaError`` (or exception) to the most specific RllmError."""
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    code = kerr.code() if isinstance(kerr, _KE) else None
    text = kerr.str() if isinstance(kerr, _KE) else str(kerr)
    if code in _UNAVAILABLE:
        return KafkaUnavailableError(
            f"{context}: Kafka unreachable ({text}); is the broker running? (rllm-cli up)"
        )
    if code in _TOO_LARGE:
        return MessageTooLargeError(f"{context}: message too large for the broker ({text})")
    if code in (_KE.UNKNOWN_TOPIC_OR_PART, _KE.TOPIC_ALREADY_EXISTS, _KE.INVALID_CONFIG):
        return TopicError(f"{context}: {text}")
    return KafkaError(f"{context}: {text}")


@contextmanager
def kafka_errors(context: str) -> Iterator[None]:
    """Re-raise confluent-kafka errors inside the block as RllmErrors naming ``context``."""
    try:
        yield
    except KafkaException as exc:
        raise translate(exc, context) from exc


def make_codec(settings: KafkaSettings) -> AvroCodec:
    """The codec for these settings: Confluent framing when a registry URL is set."""
    if settings.schema_registry_url:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return AvroCodec(SchemaRegistryClient.new_client({"url": settings.schema_registry_url}))
    return AvroCodec()


_CLIENT_LOG = logging.getLogger("rllm.kafka.librdkafka")
"""librdkafka's own log lines (``%3|...|FAIL|`` connection refusals, retried by the client
itself) from every client made here: with no handler of their own they would be printed
to stderr by the hundred while a broker is down. They reach an application's logging
configuration through propagation (``logging.getLogger("rllm.kafka").setLevel(DEBUG)``);
the failure that matters is raised as a ``KafkaUnavailableError`` naming ``rllm-cli up``."""
_CLIENT_LOG.addHandler(logging.NullHandler())


def _client_config(settings: KafkaSettings) -> dict[str, Any]:
    """``settings.client_config()`` with librdkafka's log routed to ``_CLIENT_LOG``."""
    return {**settings.client_config(), "logger": _CLIENT_LOG}


def producer_config(settings: KafkaSettings, **overrides: Any) -> dict[str, Any]:
    """Durable producer defaults: acks=all, idempotent, zstd, large messages."""
    conf: dict[str, Any] = {
        **_client_config(settings),
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 2,
        "message.max.bytes": settings.max_message_bytes + 65536,
        "message.timeout.ms": int(settings.request_timeout_s * 1000),
    }
    conf.update(overrides)
    return conf


def make_producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    """A confluent-kafka producer with our defaults."""
    with kafka_errors("creating producer"):
        return Producer(producer_config(settings, **overrides))


def consumer_config(settings: KafkaSettings, group_id: str, **overrides: Any) -> dict[str, Any]:
    """Consumer defaults: manual commits, read_committed, start from the beginning."""
    conf: dict[str, Any] = {
        **_client_config(settings),
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "fetch.max.bytes": max(settings.max_message_bytes * 2, 52428800),
        "max.partition.fetch.bytes": settings.max_message_bytes + 65536,
    }
    conf.update(overrides)
    return conf


def make_consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> Consumer:
    """A confluent-kafka consumer with our defaults."""
    with kafka_errors("creating consumer"):
        return Consumer(consumer_config(settings, group_id, **overrides))


def make_admin(settings: KafkaSettings) -> AdminClient:
    """A confluent-kafka admin client."""
    return AdminClient(_client_config(settings))


_PROBE_LOG = logging.getLogger("rllm.kafka.probe")
_PROBE_LOG.addHandler(logging.NullHandler())


def check_broker(settings: KafkaSettings, timeout_s: float = 5.0) -> int:
    """Ask the broker for metadata; return the number of brokers that answered. The
    client's own connection-refused lines go to the ``rllm.kafka.probe`` logger, not to
    stderr: a down broker is this function's answer, not noise.

    Raises:
        KafkaUnavailableError: if no broker answers within ``timeout_s``.
    """
    try:
        conf: dict[str, object] = {**settings.client_config(), "logger": _PROBE_LOG}
        # confluent-kafka's stubs omit the documented `logger` entry (a logging.Logger)
        probe = AdminClient(conf)  # type: ignore[arg-type]
        meta = probe.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"connecting to {settings.bootstrap_servers}") from exc
    return len(meta.brokers)


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
            if exc.args and exc.args[0].code() == _KE.TOPIC_ALREADY_EXISTS:
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
            if exc.args and exc.args[0].code() == _KE.UNKNOWN_TOPIC_OR_PART:
                continue
            raise translate(exc, f"deleting topic {name}") from exc


def dead_letter_for(msg: Message, exc: BaseException, consumer: str) -> DeadLetter:
    """The DeadLetter record for a message a consumer refused."""
    return DeadLetter(
        source_topic=msg.topic() or "",
        source_partition=msg.partition() or 0,
        source_offset=msg.offset() or 0,
        key=msg.key(),
        value=msg.value() or b"",
        reason=str(exc),
        error_type=type(exc).__name__,
        consumer=consumer,
    )


class Acks:
    """The acknowledgements of one batch of records: ``await acks.wait()`` returns once
    all arrived, or raises the first delivery error. The event loop wakes once per batch,
    not once per record."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        self._error: RllmError | None = None
        self._done = asyncio.Event()

    def add(self) -> None:
        """Count one more record in flight."""
        with self._lock:
            self._pending += 1

    def on_delivery(self, err: Any, msg: Any) -> None:
        """librdkafka's delivery callback (runs on the poll thread)."""
        self.settle(None if err is None else translate(err, f"publishing to {msg.topic()}"))

    def settle(self, error: RllmError | None) -> None:
        """One record in flight is done: delivered (``error`` None) or failed."""
        with self._lock:
            self._pending -= 1
            if error is not None and self._error is None:
                self._error = error
            finished = self._closed and self._pending == 0
        if finished:
            self._loop.call_soon_threadsafe(self._done.set)

    async def wait(self) -> None:
        """Wait for every record added so far (no more may be added)."""
        with self._lock:
            self._closed = True
            finished = self._pending == 0
        if not finished:
            await self._done.wait()
        if self._error is not None:
            raise self._error


class EventPublisher:
    """Publishes events as Avro with a durable producer; a background thread serves acks.

    ``publish`` returns a ``concurrent.futures.Future`` resolved with the message's
    ``(partition, offset)`` once Kafka acknowledged it (``acks=all``), or failed with an
    RllmError; asyncio callers ``await asyncio.wrap_future(fut)``. ``publish_batched``
    counts deliveries in an ``Acks`` instead, for callers that wait once per batch.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        codec: AvroCodec | None = None,
        **producer_overrides: Any,
    ) -> None:
        self.settings = settings
        self.codec = codec or make_codec(settings)
        self._producer = make_producer(settings, **producer_overrides)
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="rllm-kafka-poll", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def encode(self, topic: str, record: _Record) -> bytes:
        """Encode ``record`` for ``topic`` and check it against the topic's size limit."""
        value = self.codec.encode(record, topic=self.settings.topic(topic))
        try:
            limit = topic_spec(topic).max_message_bytes
        except KeyError:
            limit = self.settings.max_message_bytes
        limit = min(limit, self.settings.max_message_bytes)
        if len(value) > limit:
            raise MessageTooLargeError(
                f"{type(record).__name__} for topic {topic} is {len(value)} bytes, over the "
                f"{limit}-byte limit (max.message.bytes); it was refused, not truncated"
            )
        return value

    def _produce(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        on_delivery: Callable[[Any, Message], None],
        partition: int | None,
        patient: bool,
    ) -> None:
        """Queue one record. A full local queue (BufferError) is drained by polling: once,
        for 0.5 s, before the error is raised, or, when ``patient``, until there is room."""
        kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
        name = self.settings.topic(topic)
        waited = False
        while True:
            try:
                self._producer.produce(
                    name, value=value, key=key, on_delivery=on_delivery, **kwargs
                )
                return
            except BufferError:
                if waited and not patient:
                    raise
                self._producer.poll(0.05 if patient else 0.5)
                waited = True

    def publish_bytes(
        self, topic: str, key: str | bytes | None, value: bytes, partition: int | None = None
    ) -> Future[tuple[int, int]]:
        """Publish already-encoded bytes (used by the spool drain and by replays); with
        ``partition``, to that partition instead of the key's."""
        fut: Future[tuple[int, int]] = Future()

        def on_delivery(err: Any, msg: Message) -> None:
            if err is not None:
                fut.set_exception(translate(err, f"publishing to {topic}"))
            else:
                fut.set_result((msg.partition() or 0, msg.offset() or 0))

        with kafka_errors(f"publishing to {topic}"):
            self._produce(topic, key, value, on_delivery, partition, patient=False)
        return fut

    def publish_batched(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        acks: Acks,
        partition: int | None = None,
    ) -> None:
        """Queue already-encoded bytes (``value`` None: a tombstone) whose delivery
        ``acks`` counts; waits for room while the local queue is full. A refusal is
        raised by ``acks.wait()``."""
        acks.add()
        try:
            self._produce(topic, key, value, acks.on_delivery, partition, patient=True)
        except KafkaException as exc:
            acks.settle(translate(exc, f"publishing to {topic}"))

    def publish(
        self, topic: str, key: str | bytes | None, record: _Record
    ) -> Future[tuple[int, int]]:
        """Encode and publish one event; the future resolves on the broker's ack."""
        return self.publish_bytes(topic, key, self.encode(topic, record))

    def publish_sync(self, topic: str, key: str | bytes | None, record: _Record) -> tuple[int, int]:
        """Publish and wait for the ack; return ``(partition, offset)``."""
        return self.publish(topic, key, record).result(timeout=self.settings.request_timeout_s + 5)

    def flush(self, timeout_s: float | None = None) -> int:
        """Wait until every queued event is acknowledged; return how many are left."""
        left: int = self._producer.flush(
            self.settings.request_timeout_s if timeout_s is None else timeout_s
        )
        return left

    def close(self, timeout_s: float | None = None) -> None:
        """Flush (up to ``timeout_s``, default the request timeout) and stop the poll thread."""
        self.flush(timeout_s)
        self._closed.set()
        self._poller.join(timeout=5)

    def __enter__(self) -> EventPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PolicyFollower:
    """A daemon thread that reads ``rllm.policy-updates`` from the beginning, in log order.

    Each follower has a consumer group of its own (every gateway and model server must see
    every update). After each poll round it calls ``on_updates(updates, caught_up)`` with the
    PolicyUpdated records read in that round (possibly none) and whether it has read all
    the log held at its last fetch, so a caller that acts on the newest update only (the
    model server's reload) need not wait out a poll timeout. An undecodable record is logged
    and kept in ``errors``; it never stops the follower.

    Args:
        kafka: where Kafka is.
        on_updates: called on the follower's thread.
        name: names the consumer group (``rllm-<name>-<random>``) and the thread.
        poll_s: how long one poll waits for a record.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        on_updates: Callable[[list[Any], bool], None],
        *,
        name: str,
        poll_s: float = 0.5,
    ) -> None:
        self.kafka, self.name, self.poll_s = kafka, name, poll_s
        self._on_updates = on_updates
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rllm-{name}-policy", daemon=True)

    def start(self) -> PolicyFollower:
        """Start following."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        codec = make_codec(self.kafka)
        consumer = make_consumer(
            self.kafka,
            f"rllm-{self.name}-{uuid.uuid4().hex[:12]}",
            **{"topic.metadata.refresh.interval.ms": 2000},  # see a topic created later
        )
        consumer.subscribe([self.kafka.topic(POLICY_UPDATES)])
        try:
            while not self._stop.is_set():
                msg, idle = consumer.poll(self.poll_s), True
                updates: list[PolicyUpdated] = []
                while msg is not None:  # take what has arrived, then see whether that is all
                    idle = False
                    rec = self._decode(codec, msg)
                    if isinstance(rec, PolicyUpdated):
                        updates.append(rec)
                    msg = consumer.poll(0)
                self._on_updates(updates, idle or _caught_up(consumer))
        finally:
            consumer.close()

    def _decode(self, codec: AvroCodec, msg: Message) -> Any:
        err = msg.error()
        if err is not None:
            if err.code() not in (_KE.UNKNOWN_TOPIC_OR_PART, _KE._PARTITION_EOF):
                log.warning("policy updates: %s", err.str())
            return None
        try:
            return codec.decode(msg.value() or b"")
        except Exception as exc:  # a bad record must not stop the follower
            self.errors.append(f"undecodable policy update at offset {msg.offset()}: {exc}")
            log.warning("policy updates: %s", self.errors[-1])
            return None


def _caught_up(consumer: Consumer) -> bool:
    """Whether the consumer has read every partition up to the high watermark its last
    fetch reported (unknown offsets count as not caught up)."""
    parts = consumer.assignment()
    if not parts:
        return False
    for tp in consumer.position(parts):
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if tp.offset < 0 or high < 0 or tp.offset < high:
            return False
    return True
