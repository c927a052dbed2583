"""The consume side: ``TopicReader`` polls topics, decodes each record with the codec (or
the caller's decoder) or dead-letters it with the reason, keeps the offsets of what it
returned, and commits only when asked. Components read through it instead of writing
``poll`` loops of their own.

A reader returns every record it read, in each partition's order, as a
``ConsumedRecord``: ``event`` set, or ``error`` set with the exception that refused it
(after the dead-letter callback, when one is given, took the record). End-of-partition
events are kept in ``ended``; a topic that does not exist yet is not an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, Message, TopicPartition

from rllm.errors import RllmError, SchemaError
from rllm.kafka.clients import make_codec, make_consumer
from rllm.kafka.errors import is_end_of_partition, is_unknown_topic, kafka_errors, translate
from rllm.kafka.publish import EventPublisher
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import DEAD_LETTERS
from rllm.schemas.types import DeadLetter
from rllm.settings import KafkaSettings

__all__ = [
    "ConsumedRecord",
    "Decoder",
    "MessageLike",
    "Position",
    "Start",
    "TopicReader",
    "dead_letter_for",
    "dead_letters_to",
]

log = logging.getLogger(__name__)

Position = tuple[str, int, int]
"""Where a record was read: ``(topic, partition, offset)``."""

Decoder = Callable[[bytes, Position], Any]
"""Turns a record's value (read at ``Position``) into what the reader returns as
``event``; an exception in the reader's ``refuse`` tuple refuses the record."""

Start = Literal["beginning", "end", "committed"]
"""Where an assigned partition without an explicit offset starts: its first record, the
end of its log (only records that arrive from now on), or the group's committed offset
(else ``auto.offset.reset``, the beginning)."""

_START = {"beginning": OFFSET_BEGINNING, "end": OFFSET_END, "committed": OFFSET_INVALID}


class MessageLike(Protocol):
    """The parts of a consumed message a dead letter copies (confluent-kafka's
    ``Message``, or the processors' view of one)."""

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> str | bytes | None: ...

    def value(self) -> str | bytes | None: ...


def _letter(pos: Position, key: Any, value: Any, exc: BaseException, consumer: str) -> DeadLetter:
    return DeadLetter(
        source_topic=pos[0],
        source_partition=pos[1],
        source_offset=pos[2],
        key=key,
        value=value or b"",
        reason=str(exc),
        error_type=type(exc).__name__,
        consumer=consumer,
    )


def dead_letter_for(msg: MessageLike, exc: BaseException, consumer: str) -> DeadLetter:
    """The DeadLetter record for a message a consumer refused."""
    pos = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
    return _letter(pos, msg.key(), msg.value(), exc, consumer)


def dead_letters_to(publisher: EventPublisher) -> Callable[[DeadLetter], None]:
    """A dead-letter callback that publishes to ``rllm.dead-letters`` (keyed as the
    refused record was) and waits for the broker's ack."""

    def publish(letter: DeadLetter) -> None:
        publisher.publish_sync(DEAD_LETTERS, letter.key, letter)

    return publish


@dataclass(slots=True)
class ConsumedRecord:
    """One record a ``TopicReader`` read: decoded, or refused with the reason. Treat it
    as read-only (not ``frozen``: a frozen dataclass costs 0.6 µs more per record)."""

    topic: str
    """Full topic name."""
    partition: int
    """Partition."""
    offset: int
    """Offset within the partition."""
    key: bytes | None
    """Kafka key, as it was."""
    value: bytes
    """Value, as it was."""
    timestamp_ms: int
    """Kafka timestamp."""
    event: Any = None
    """What the decoder returned (the pydantic event by default); None when refused."""
    error: BaseException | None = None
    """Why the record was refused (and dead-lettered, when the reader has a callback)."""

    @property
    def position(self) -> Position:
        """``(topic, partition, offset)``."""
        return (self.topic, self.partition, self.offset)


class TopicReader:
    """A consumer that decodes or dead-letters, tracks offsets, and commits on demand.

    Topics are full names (``KafkaSettings.topic(name)``). Commits are manual (the
    consumer defaults of ``rllm.kafka.consumer_config``): ``commit()`` commits the
    offsets after every record returned since the last commit, ``commit(offsets)`` the
    given ones (a checkpoint's).

    Args:
        kafka: where Kafka is.
        group_id: the consumer group.
        name: the component reading (the ``consumer`` of its dead letters, and the
            context of its errors: ``committing <name> offsets``).
        codec: decodes values (default: ``make_codec(kafka)``).
        decode: replaces ``codec.decode`` (e.g. to decode to Avro dicts and map rows).
        expect: the event types accepted; another decoded type is refused with a
            ``SchemaError`` naming the topic.
        refuse: the exceptions of ``decode`` that refuse a record (others propagate).
        dead_letter: called with the ``DeadLetter`` of each refused record before the
            record is returned (``dead_letters_to(publisher)`` publishes it).
        on_error: what a consumer error other than end-of-partition or a missing topic
            does: ``raise`` it as an RllmError, or ``log`` it and go on.
        config: consumer settings over our defaults (``consumer_config``).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        group_id: str,
        *,
        name: str,
        codec: AvroCodec | None = None,
        decode: Decoder | None = None,
        expect: type | tuple[type, ...] | None = None,
        refuse: tuple[type[BaseException], ...] = (RllmError, ValueError),
        dead_letter: Callable[[DeadLetter], object] | None = None,
        on_error: Literal["raise", "log"] = "raise",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.kafka, self.name = kafka, name
        self.codec = codec or make_codec(kafka)
        self._decode: Decoder = decode or (lambda value, _pos: self.codec.decode(value))
        self._expect = expect
        self._refuse = refuse
        self._dead_letter = dead_letter
        self._on_error = on_error
        self._positions: dict[str, dict[int, int]] = {}
        self.ended: set[tuple[str, int]] = set()
        """Partitions that reported their end (needs ``enable.partition.eof``)."""
        self.quiet = True
        """Whether the last read got nothing from the broker, not even an event."""
        self._consumer = make_consumer(kafka, group_id, **(config or {}))

    # where to read ----------------------------------------------------------------------

    def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic``, sorted; empty when the topic does not exist."""
        with kafka_errors(f"reading partitions of {topic}"):
            meta = self._consumer.list_topics(topic, timeout=self.kafka.request_timeout_s)
        found = meta.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return []
        return sorted(found.partitions)

    def assign(
        self,
        topic: str,
        partitions: Iterable[int],
        start: Start = "committed",
        offsets: Mapping[int, int] | None = None,
    ) -> None:
        """Read ``partitions`` of ``topic`` without a group rebalance: each at its offset
        in ``offsets`` where it has one, else at ``start``. ``end`` is the end of each log
        when this returns (asked of the broker now, not at the first fetch), so every
        record published after ``assign`` is read."""
        at, parts = dict(offsets or {}), list(partitions)
        with kafka_errors(f"assigning {topic}"):
            if start == "end":
                for p in parts:
                    if p not in at:
                        _low, at[p] = self._consumer.get_watermark_offsets(
                            TopicPartition(topic, p), timeout=self.kafka.request_timeout_s
                        )
            self._consumer.assign(
                [TopicPartition(topic, p, at.get(p, _START[start])) for p in parts]
            )

    def subscribe(self, topics: list[str], on_assign: Callable[[], None] | None = None) -> None:
        """Join the group for ``topics`` (names, or regexes starting with ``^``);
        ``on_assign`` is called (on a later read) when partitions are assigned."""

        with kafka_errors(f"subscribing the {self.name}"):
            if on_assign is None:
                self._consumer.subscribe(topics)
            else:
                self._consumer.subscribe(topics, on_assign=lambda _c, _p: on_assign())

    # reading ----------------------------------------------------------------------------

    def read(self, max_records: int = 500, timeout_s: float = 0.5) -> list[ConsumedRecord]:
        """Up to ``max_records`` records, waiting until that many arrived or ``timeout_s``
        passed (librdkafka's ``consume``)."""
        with kafka_errors(f"{self.name} polling"):
            msgs = self._consumer.consume(max_records, timeout=timeout_s)
        return self._take(msgs)

    def poll(self, timeout_s: float = 0.5) -> ConsumedRecord | None:
        """The next record, or None when none arrived within ``timeout_s`` (or only an
        end-of-partition or error event did)."""
        records = self.read(1, timeout_s)
        return records[0] if records else None

    def read_available(
        self, timeout_s: float = 0.5, max_records: int = 500
    ) -> list[ConsumedRecord]:
        """Wait up to ``timeout_s`` for a first record, then take those already fetched
        (up to ``max_records``) without waiting for more; ``quiet`` says whether nothing
        at all arrived."""
        with kafka_errors(f"{self.name} polling"):
            first = self._consumer.poll(timeout_s)
            if first is None:
                self.quiet = True
                return []
            msgs = [first]
            while len(msgs) < max_records:
                more = self._consumer.consume(max_records - len(msgs), timeout=0)
                if not more:
                    break
                msgs.extend(more)
        return self._take(msgs)

    def _take(self, msgs: list[Message]) -> list[ConsumedRecord]:
        """Decode (or refuse) each message and note its offset; one loop, no call per
        record but the decoder's (the history sink reads tens of thousands a second)."""
        self.quiet = not msgs
        out = []
        decode, expect, refuse = self._decode, self._expect, self._refuse
        positions = self._positions
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self._event(msg, err)
                continue
            pos = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
            value = msg.value() or b""
            error: BaseException | None = None
            try:
                event = decode(value, pos)
                if expect is not None and not isinstance(event, expect):
                    raise SchemaError(
                        f"expected {_names(expect)} on {pos[0]}, got {type(event).__name__}"
                    )
            except refuse as exc:
                event, error = None, exc
            key = msg.key()
            if error is not None and self._dead_letter is not None:
                self._dead_letter(_letter(pos, key, value, error, self.name))
            parts = positions.get(pos[0])
            if parts is None:
                parts = positions[pos[0]] = {}
            parts[pos[1]] = pos[2] + 1
            out.append(ConsumedRecord(*pos, key, value, msg.timestamp()[1], event, error))
        return out

    def _event(self, msg: Message, err: Any) -> None:
        """An end-of-partition or error event in place of a record."""
        if is_end_of_partition(err):
            self.ended.add((msg.topic() or "", msg.partition() or 0))
        elif is_unknown_topic(err):
            pass  # subscribed before the topic was created: it may come
        elif self._on_error == "log":
            log.warning("%s: consumer error: %s", self.name, err.str())
        else:
            raise translate(err, f"{self.name} polling")

    # offsets ----------------------------------------------------------------------------

    @property
    def positions(self) -> dict[str, dict[int, int]]:
        """Per topic and partition, the offset after the last record returned since the
        last ``commit()`` (what that commit would store)."""
        return {t: dict(parts) for t, parts in self._positions.items()}

    def commit(self, offsets: Mapping[str, Mapping[Any, int]] | None = None) -> None:
        """Commit synchronously: ``offsets`` (topic -> partition -> next offset; partition
        keys may be strings, as in a checkpoint), or else ``positions``, which are then
        forgotten.

        Raises:
            KafkaUnavailableError: if the broker (or the group coordinator) is away.
        """
        source = self._positions if offsets is None else offsets
        tps = [
            TopicPartition(t, int(p), o) for t, parts in source.items() for p, o in parts.items()
        ]
        if tps:
            with kafka_errors(f"committing {self.name} offsets"):
                self._consumer.commit(offsets=tps, asynchronous=False)
        if offsets is None:
            self._positions.clear()

    def caught_up(self) -> bool:
        """Whether every assigned partition has been read up to the high watermark the
        last fetch reported (unknown offsets count as not caught up)."""
        with kafka_errors(f"{self.name} positions"):
            parts = self._consumer.assignment()
            if not parts:
                return False
            for tp in self._consumer.position(parts):
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
                if tp.offset < 0 or high < 0 or tp.offset < high:
                    return False
        return True

    def close(self) -> None:
        """Leave the group (what was not committed is read again by the next reader)."""
        with kafka_errors(f"closing the {self.name} consumer"):
            self._consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _names(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(t.__name__ for t in types)
