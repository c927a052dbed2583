"""librdkafka producers for the processors' outputs and table changelogs.

Why not faust's producer: aiokafka builds, checksums and writes every batch in Python on
the event loop, and faust queues each table write through a coroutine of its own; at a
few hundred KiB per session that was most of the worker's time. librdkafka does the same
work in its own threads. Acknowledgements are counted per ``Acks`` batch, so the event
loop wakes once per batch, not once per record.

Candidate for ``rllm/kafka.py`` (a partition-aware, batch-acknowledged producer).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka import KafkaException

from rllm.errors import RllmError
from rllm.kafka import make_producer, translate
from rllm.settings import KafkaSettings

__all__ = ["Acks", "BatchProducer"]


class Acks:
    """The acknowledgements of one batch of records: ``await acks.wait()`` returns once
    all arrived, or raises the first delivery error."""

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
        with self._lock:
            self._pending -= 1
            if err is not None and self._error is None:
                self._error = translate(err, f"publishing to {msg.topic()}")
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


class BatchProducer:
    """A durable producer (acks=all, idempotent) with a poll thread for deliveries.

    Args:
        kafka: where Kafka is (topic names given to ``produce`` are full names).
        compression: ``compression.type``.
        linger_ms: ``linger.ms``.
    """

    def __init__(self, kafka: KafkaSettings, compression: str, linger_ms: int) -> None:
        self._producer = make_producer(kafka, **{
            "compression.type": compression, "linger.ms": linger_ms,
            # keys land where faust's producer and Java clients put them
            "partitioner": "murmur2_random"})
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="rllm-processors-poll",
                                        daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def produce(self, topic: str, key: bytes | None, value: bytes | None, acks: Acks,
                partition: int | None = None) -> None:
        """Queue one record (``value`` None: a tombstone); ``acks`` counts its delivery."""
        kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
        acks.add()
        while True:
            try:
                self._producer.produce(topic, value=value, key=key,
                                       on_delivery=acks.on_delivery, **kwargs)
                return
            except BufferError:  # local queue full: let deliveries drain it
                self._producer.poll(0.05)
            except KafkaException as exc:
                acks.on_delivery(exc.args[0], _Named(topic))
                return

    def close(self, timeout_s: float = 30.0) -> None:
        """Deliver what is queued (up to ``timeout_s``) and stop the poll thread."""
        self._producer.flush(timeout_s)
        self._closed.set()
        self._poller.join(timeout=5)


class _Named:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic
