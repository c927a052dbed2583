"""Read and decode events from any topic, for ``rllm-cli events tail``: corrupt records are
reported with their offset and reason, never raised.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rllm.errors import TopicError
from rllm.kafka import TopicReader
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

    Without ``follow`` it stops at the end of the log as it was when tailing began;
    without ``from_beginning`` it reads only records that arrive from now on.

    Raises:
        TopicError: if the topic does not exist.
    """
    full = settings.topic(topic)
    reader = TopicReader(
        settings,
        f"rllm-tail-{uuid.uuid4().hex[:12]}",
        name="tail",
        config={"isolation.level": "read_uncommitted", "enable.partition.eof": True},
    )
    try:
        partitions = reader.partitions(full)
        if not partitions:
            raise TopicError(f"topic {full!r} does not exist on {settings.bootstrap_servers}")
        if not from_beginning and not follow:
            return
        reader.assign(full, partitions, "beginning" if from_beginning else "end")
        seen = 0
        while follow or {(full, p) for p in partitions} - reader.ended:
            rec = reader.poll(poll_timeout_s)
            if rec is None:
                continue
            error = None if rec.error is None else f"{type(rec.error).__name__}: {rec.error}"
            yield TailedRecord(
                full, rec.partition, rec.offset, _key(rec.key), rec.timestamp_ms, rec.event, error
            )
            seen += 1
            if max_records is not None and seen >= max_records:
                return
    finally:
        reader.close()
