"""Ids, keys and the dedup rule of the events, one definition for every component.

Processor outputs have deterministic ids, so a record published again after a crash has
the same ``event_id`` (at-least-once delivery); consumers keep the first record per
``event_id``. Trajectories and episodes are keyed by their group (``run_id/task_id``), so
a task's runs meet on one partition of rllm.trajectories.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from rllm.schemas.policy import PolicyUpdated

__all__ = [
    "dedup_by_event_id",
    "episode_id",
    "group_key",
    "policy_event_id",
    "policy_updated",
    "trajectory_id",
]


def trajectory_id(session_id: str) -> str:
    """Deterministic event id of a session's trajectory."""
    return f"traj:{session_id}"


def episode_id(run_id: str, task_id: str) -> str:
    """Deterministic event id of an episode."""
    return f"ep:{run_id}/{task_id}"


def group_key(run_id: str, task_id: str) -> str:
    """Kafka key of rllm.trajectories and rllm.episodes."""
    return f"{run_id}/{task_id}"


def policy_event_id(run_id: str, version: int) -> str:
    """Deterministic event id of a run's policy version (a PolicyUpdated published again,
    after a crash or a resume, keeps it)."""
    return f"{run_id}/v{version}"


def policy_updated(
    run_id: str,
    version: int,
    checkpoint_uri: str,
    *,
    base_model: str,
    backend: str,
    metrics: dict[str, float],
    num_episodes: int = 0,
    num_tokens: int = 0,
) -> PolicyUpdated:
    """The ``PolicyUpdated`` of a checkpointed policy version, the one way every trainer
    (the episode consumer, SFT) announces it.

    Args:
        run_id: The training run.
        version: Policy version of the checkpoint.
        checkpoint_uri: Where its weights are.
        base_model: Model the run started from.
        backend: Training backend that wrote it.
        metrics: Metrics of the update (of the checkpoint, when announced again).
        num_episodes: Episodes in the update's batch (0 for an announcement).
        num_tokens: Trained tokens in the update's batch.
    """
    return PolicyUpdated(
        event_id=policy_event_id(run_id, version),
        run_id=run_id,
        version=version,
        checkpoint_uri=checkpoint_uri,
        base_model=base_model,
        backend=backend,
        metrics=metrics,
        num_episodes=num_episodes,
        num_tokens=num_tokens,
    )


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
