"""Read and decode events from any topic, for ``rllm-cli events tail``: corrupt records are
reported with their offset and reason, never raised.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from rllm.errors import RllmError, TopicError
from rllm.kafka import kafka_errors, make_codec, make_consumer, translate
from rllm.schemas.convert import to_json_dict
from rllm.settings import KafkaSettings

__all__ = ["TailedRecord", "tail_topic"]


@dataclass(frozen=True)
class TailedRecord:
    """One record read from a topic: its decoded event, or why it could not be decoded."""

    topic: str
    """Topic it was read from."""
    partition: int
    """Partition."""
    offset: int
    """Offset within the partition."""
    key: str | None
    """Kafka key, decoded as UTF-8 (hex when it is not text)."""
    timestamp_ms: int
    """Kafka timestamp."""
    event: Any | None
    """The decoded pydantic event, or None when decoding failed."""
    error: str | None = None
    """Why decoding failed."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: position, key, and the event or the error."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": self.key,
            "timestamp_ms": self.timestamp_ms,
        }
        if self.event is not None:
            out["type"] = type(self.event).__name__
            out["event"] = to_json_dict(self.event)
        else:
            out["error"] = self.error
        return out


def _key(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.hex()


def tail_topic(
    settings: KafkaSettings,
    topic: str,
    *,
    from_beginning: bool = False,
    follow: bool = False,
    max_records: int | None = None,
    poll_timeout_s: float = 0.5,
) -> Iterator[TailedRecord]:
    """Yield the records of ``topic`` in partition order.

    Without ``follow`` it stops at the end of the log as it was when tailing began.

    Raises:
        TopicError: if the topic does not exist.
    """
    full = settings.topic(topic)
    codec = make_codec(settings)
    consumer = make_consumer(
        settings,
        f"rllm-tail-{uuid.uuid4().hex[:12]}",
        **{"isolation.level": "read_uncommitted", "enable.partition.eof": True},
    )
    try:
        with kafka_errors(f"reading {full}"):
            meta = consumer.list_topics(full, timeout=settings.request_timeout_s)
        tmeta = meta.topics.get(full)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            raise TopicError(f"topic {full!r} does not exist on {settings.bootstrap_servers}")
        partitions = sorted(tmeta.partitions)
        if not from_beginning and not follow:
            return
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(full, p, start) for p in partitions])
        pending = set(partitions)  # partitions that have not reached their end yet
        seen = 0
        while follow or pending:
            msg = consumer.poll(poll_timeout_s)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise translate(err, f"reading {full}")
            value = msg.value() or b""
            try:
                event, error = codec.decode(value), None
            except RllmError as exc:
                event, error = None, f"{type(exc).__name__}: {exc}"
            except ValueError as exc:  # a pydantic ValidationError on a well-framed record
                event, error = None, f"{type(exc).__name__}: {exc}"
            yield TailedRecord(
                full,
                msg.partition() or 0,
                msg.offset() or 0,
                _key(msg.key()),
                msg.timestamp()[1],
                event,
                error,
            )
            seen += 1
            if max_records is not None and seen >= max_records:
                return
    except KafkaException as exc:
        raise translate(exc, f"reading {full}") from exc
    finally:
        consumer.close()
