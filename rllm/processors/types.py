"""Contracts of the processors: the outputs they emit and their table state (their errors
are in ``rllm.processors.errors``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from rllm.schemas.types import Record

__all__ = [
    "Emit",
    "GroupHeader",
    "Output",
    "SessionHeader",
    "SessionPhase",
]


class Output(StrEnum):
    """Where an emitted record goes (resolved to a full topic name by the app)."""

    SCORING = "scoring"
    """Internal: an assembled trajectory waiting for its reward."""
    TRAJECTORIES = "trajectories"
    """rllm.trajectories."""
    EPISODES = "episodes"
    """rllm.episodes."""
    DEAD_LETTERS = "dead-letters"
    """rllm.dead-letters: refused events and reports (late steps, count mismatches)."""


@dataclass(frozen=True)
class Emit:
    """One record a processor wants published."""

    output: Output
    """Destination."""
    key: bytes
    """Kafka key."""
    record: Record | None = None
    """The record (encoded with the Avro codec by the app)."""
    value: bytes | None = None
    """Or the record already encoded (fast paths that never build a pydantic model)."""


class SessionPhase(StrEnum):
    """Where a session is in its life."""

    OPEN = "open"
    AWAITING_REWARD = "awaiting_reward"
    DONE = "done"


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionHeader(_State):
    """Per-session table row (JSON); the events themselves sit in the events table."""

    session_id: str
    """The session."""
    run_id: str
    """Its run."""
    partition: int
    """Source partition (timers send their ticks there)."""
    phase: SessionPhase = SessionPhase.OPEN
    """Where the session is."""
    event_ids: list[str] = []
    """Every event id accepted (dedup and late-event detection)."""
    has_reward_fn: bool = False
    """The opened task names a reward function."""
    has_reward: bool = False
    """A RewardAssigned arrived."""
    last_event_at: float = 0.0
    """Wall time of the last accepted event (idle timeout)."""
    reward_deadline: float | None = None
    """Wall time after which an unscored closed session goes out without reward."""
    done_at: float | None = None
    """Wall time the trajectory was emitted."""
    done_reason: str = ""
    """closed, idle_timeout, reward_wait_expired or invalid."""


class GroupHeader(_State):
    """Per-group table row (JSON); trajectories sit in the members table."""

    run_id: str
    """Run."""
    task_id: str
    """Task."""
    partition: int
    """Source partition of rllm.trajectories."""
    group_size: int
    """Declared group size."""
    session_ids: list[str] = []
    """Members so far, in arrival order."""
    first_at: float = 0.0
    """Wall time of the first member (group timeout)."""
    done: bool = False
    """The episode was emitted."""
    done_at: float | None = None
    """When."""
