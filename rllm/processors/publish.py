"""Publishing the processors' outputs and table changelogs, acknowledged per batch.

Why not faust's producer: aiokafka builds, checksums and writes every batch in Python on
the event loop, and faust sends each table write through a coroutine of its own; at a
few hundred KiB per session that was most of the worker's time. ``rllm.kafka``'s
``EventPublisher`` (librdkafka) does that work in its own threads, and ``Acks`` counts the
deliveries per batch, so the event loop wakes once per batch, not once per record.

Order (at-least-once, never a lost record): a batch's outputs are published and
acknowledged first; then its staged table writes are applied and their changelog records
acknowledged; only then does the agent take the next batch, which acknowledges the
batch's source records to faust (committable offsets).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rllm.kafka import Acks, EventPublisher
from rllm.processors.deadletter import report
from rllm.processors.settings import ProcessorSettings
from rllm.processors.staged import StagedStore
from rllm.processors.types import Emit, Output
from rllm.schemas.codec import AvroCodec
from rllm.settings import KafkaSettings

__all__ = ["Outputs", "Sink"]

Sink = Callable[[Output, bytes, bytes], Awaitable[Awaitable[Any] | None]]
"""Where encoded outputs go instead (unit tests): ``(output, key, value)``; returns an
ack to await, or None when the record is durable already. (Not ``HistorySink`` nor the
gateway's ``EventSink``: a publish function.)"""


class Outputs:
    """Encodes and publishes outputs; applies staged state after their acks.

    Args:
        settings: processor settings (compression, linger).
        kafka: where Kafka is.
        codec: the Avro codec.
        names: full topic name of every ``Output``.
        sink: replaces Kafka (unit tests with ``agent.test_context()``); table changes
            then go through faust's own changelog producer.
    """

    def __init__(
        self,
        settings: ProcessorSettings,
        kafka: KafkaSettings,
        codec: AvroCodec,
        names: Mapping[Any, str],
        sink: Sink | None = None,
    ) -> None:
        self.settings, self.kafka, self.codec, self.names = settings, kafka, codec, names
        self.sink = sink
        self._producers: dict[bool, EventPublisher] = {}

    def _producer(self, internal: bool) -> EventPublisher:
        """The worker's librdkafka producers: outputs (``output_compression``), and the
        internal scoring topic plus table changelogs (``internal_compression``)."""
        prod = self._producers.get(internal)
        if prod is None:
            bare = self.kafka.model_copy(update={"topic_prefix": ""})  # names are full already
            compression = (
                self.settings.internal_compression if internal else self.settings.output_compression
            )
            prod = self._producers[internal] = EventPublisher(
                bare,
                self.codec,
                **{
                    "compression.type": compression,
                    "linger.ms": max(1, round(self.settings.linger_s * 1000)),
                    # keys land where faust's producer and Java clients put them
                    "partitioner": "murmur2_random",
                    # retry until delivered: with the broker away the agents wait (their
                    # records stay uncommitted) instead of failing after 30 s and dying
                    "message.timeout.ms": 0,
                },
            )
        return prod

    def close(self) -> None:
        """Deliver what is queued (up to 30 s) and stop the producers."""
        for prod in self._producers.values():
            prod.close(30.0)
        self._producers.clear()

    async def emit_then_apply(self, emits: list[Emit], stores: tuple[StagedStore, ...]) -> None:
        """Publish outputs and wait for their acks, then apply the state that says they went
        out, and wait for the changelog's acks too: a batch's source records become
        committable only after both are durable. A crash in between yields a duplicate
        output (same event_id), never a lost record."""
        try:
            await self.emit(emits)
        except BaseException:
            for store in stores:
                store.discard()
            raise
        if self.sink is not None:  # unit tests: faust's own changelog path
            for store in stores:
                store.apply()
            return
        acks = Acks(asyncio.get_running_loop())
        prod = self._producer(internal=True)
        for store in stores:
            topic = store.table.changelog_topic.get_topic_name()  # type: ignore[attr-defined]  # faust's StoreT stubs lack .table
            store.apply(functools.partial(_changelog_send, prod, topic, acks))
        await acks.wait()

    async def emit(self, emits: list[Emit]) -> None:
        """Encode and publish all, then wait for every ack; a record over the size limit
        becomes a dead letter."""
        acks = Acks(asyncio.get_running_loop()) if self.sink is None else None
        waits = []
        for e in emits:
            if e.value is not None:
                value = e.value
            else:
                assert e.record is not None
                value = self.codec.encode(e.record, topic=self.names[e.output])
            if len(value) > self.kafka.max_message_bytes and e.output != Output.DEAD_LETTERS:
                name = type(e.record).__name__ if e.record is not None else e.output.value
                eid = getattr(e.record, "event_id", e.key.decode(errors="replace"))
                reason = (
                    f"{name} {eid} is "
                    f"{len(value)} bytes, over max_message_bytes="
                    f"{self.kafka.max_message_bytes}; refused, not truncated"
                )
                e = report(
                    self.names[e.output],
                    -1,
                    -1,
                    e.key,
                    b"",
                    reason,
                    "MessageTooLargeError",
                    stage=e.output.value,
                )
                assert e.record is not None
                value = self.codec.encode(e.record, topic=self.names[e.output])
            if acks is not None:
                self._producer(e.output == Output.SCORING).publish_batched(
                    self.names[e.output], e.key, value, acks
                )
            else:
                assert self.sink is not None
                wait = await self.sink(e.output, e.key, value)
                if wait is not None:
                    waits.append(wait)
        if acks is not None:
            await acks.wait()
        if waits:
            await asyncio.gather(*waits)


def _changelog_send(
    prod: EventPublisher, topic: str, acks: Acks, partition: int, key: bytes, value: bytes | None
) -> None:
    prod.publish_batched(topic, key, value, acks, partition=partition)
