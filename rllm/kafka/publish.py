"""The publish side: ``EventPublisher`` encodes events as Avro and produces them durably,
with a future per record or an ``Acks`` counted per batch for high-rate producers such as
the processors.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaException, Message

from rllm.errors import MessageTooLargeError, RllmError
from rllm.kafka.clients import make_codec, make_producer
from rllm.kafka.errors import kafka_errors, translate
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import topic_spec
from rllm.schemas.types import Record
from rllm.settings import KafkaSettings

__all__ = ["Acks", "EventPublisher"]


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

    def encode(self, topic: str, record: Record) -> bytes:
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
        self, topic: str, key: str | bytes | None, record: Record
    ) -> Future[tuple[int, int]]:
        """Encode and publish one event; the future resolves on the broker's ack."""
        return self.publish_bytes(topic, key, self.encode(topic, record))

    def publish_sync(self, topic: str, key: str | bytes | None, record: Record) -> tuple[int, int]:
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
