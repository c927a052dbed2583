"""The consumers' dedup rule for processor outputs (at-least-once delivery).

After a crash the processors may publish a trajectory or episode again; the copy has the
same deterministic ``event_id`` and the same content except emission times. A consumer
keeps the first record per ``event_id`` and drops the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

__all__ = ["dedup_by_event_id"]


class _HasEventId(Protocol):
    @property
    def event_id(self) -> str: ...


R = TypeVar("R", bound=_HasEventId)


def dedup_by_event_id(records: Iterable[R]) -> list[R]:
    """Keep the first record per ``event_id``, in order."""
    seen: set[str] = set()
    out = []
    for record in records:
        if record.event_id not in seen:
            seen.add(record.event_id)
            out.append(record)
    return out
