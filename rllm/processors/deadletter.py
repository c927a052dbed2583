"""Dead letters: refused events (undecodable, invalid) and reports (late events, step-count
mismatches) go to rllm.dead-letters with the reason; the worker keeps going.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rllm.kafka import dead_letter_for
from rllm.processors.types import Emit, Output
from rllm.schemas.types import DeadLetter

__all__ = ["CONSUMER", "MessageView", "refused", "report"]

CONSUMER = "rllm-processors"
"""The ``consumer`` name written into our dead letters."""


@dataclass(frozen=True)
class MessageView:
    """A consumed record, shaped like ``confluent_kafka.Message`` for ``dead_letter_for``."""

    topic_: str
    partition_: int
    offset_: int
    key_: bytes | None
    value_: bytes | None

    def topic(self) -> str:
        """Its topic."""
        return self.topic_

    def partition(self) -> int:
        """Its partition."""
        return self.partition_

    def offset(self) -> int:
        """Its offset."""
        return self.offset_

    def key(self) -> bytes | None:
        """Its key."""
        return self.key_

    def value(self) -> bytes | None:
        """Its value."""
        return self.value_


def refused(view: MessageView, exc: BaseException, stage: str) -> Emit:
    """The dead letter for a record ``stage`` could not accept."""
    msg: Any = view
    letter = dead_letter_for(msg, exc, f"{CONSUMER}/{stage}")
    return Emit(Output.DEAD_LETTERS, view.key_ or b"", letter)


def report(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes,
    reason: str,
    error_type: str,
    stage: str = "assemble",
) -> Emit:
    """A dead letter that reports an anomaly (offset -1 when no single record caused it)."""
    letter = DeadLetter(
        source_topic=topic,
        source_partition=partition,
        source_offset=offset,
        key=key,
        value=value,
        reason=reason,
        error_type=error_type,
        consumer=f"{CONSUMER}/{stage}",
    )
    return Emit(Output.DEAD_LETTERS, key or b"", letter)
