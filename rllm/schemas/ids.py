"""Ids, keys and the dedup rule of the events, one definition for every component.

Processor outputs have deterministic ids, so a record published again after a crash has
the same ``event_id`` (at-least-once delivery); consumers keep the first record per
``event_id``. Trajectories and episodes are keyed by their group (``run_id/task_id``), so
a task's runs meet on one partition of rllm.trajectories.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

__all__ = ["dedup_by_event_id", "episode_id", "group_key", "trajectory_id"]


def trajectory_id(session_id: str) -> str:
    """Deterministic event id of a session's trajectory."""
    return f"traj:{session_id}"


def episode_id(run_id: str, task_id: str) -> str:
    """Deterministic event id of an episode."""
    return f"ep:{run_id}/{task_id}"


def group_key(run_id: str, task_id: str) -> str:
    """Kafka key of rllm.trajectories and rllm.episodes."""
    return f"{run_id}/{task_id}"


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
