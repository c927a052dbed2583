"""What a training run did: ``UpdateRecord`` per batch, ``TrainReport`` per run, and the
trainer's drop counters in words (``describe_drops``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["TrainReport", "UpdateRecord", "describe_drops"]


@dataclass(frozen=True)
class UpdateRecord:
    """One batch of rollouts and the update it fed."""

    version: int
    """Policy version after the update (unchanged when the batch was dropped)."""
    rollout_version: int
    """Policy version that generated the batch's rollouts: the ``policy_version`` their
    steps carry, which ``rllm-cli analytics rewards`` groups by (one less than ``version``
    after an update in sync mode)."""
    reward_mean: float
    """Mean reward of the batch's rollouts."""
    accuracy: float
    """Share of correct rollouts."""
    rollouts: int
    """Rollouts in the batch."""
    seconds: float
    """Wall time of rollouts plus update."""
    rollout_s: float = 0.0
    """Wall time of the rollouts (generation through the gateway)."""
    update_s: float = 0.0
    """Wall time from the last rollout to the gateway serving the new version (sync mode):
    processors, training, checkpoint, publish and the model server's reload."""
    train_s: float = 0.0
    """The backend's update time, as the trainer reported it (0 when no update)."""
    checkpoint_s: float = 0.0
    """Writing the checkpoint, as the trainer reported it."""
    completion_tokens: int = 0
    """Tokens the rollouts generated."""
    prompt_tokens: int = 0
    """Prompt tokens the rollouts sent (every call's, as the upstream counted them)."""
    elapsed_s: float = 0.0
    """Wall time since train() started, at the end of this batch."""
    failed: int = 0
    """Rollouts whose session closed with an error or a timeout."""
    first_error: str | None = None
    """The first of their errors."""

    @property
    def updated(self) -> bool:
        """Whether the batch made a policy update."""
        return self.version != self.rollout_version

    def __str__(self) -> str:
        """``rollouts of v0: reward 0.225 (22% correct) -> v1; rollouts 3.1s, ...``."""
        then = f"v{self.version}" if self.updated else "no update"
        return (
            f"rollouts of v{self.rollout_version}: reward {self.reward_mean:.3f} "
            f"({self.accuracy:.0%} correct) -> {then}; rollouts {self.rollout_s:.1f}s, "
            f"train {self.train_s:.1f}s, wait for the new version {self.update_s:.1f}s, "
            f"t={self.elapsed_s / 60:.1f} min"
        )


@dataclass
class TrainReport:
    """What ``train()`` did."""

    run_id: str
    updates: list[UpdateRecord] = field(default_factory=list)
    version: int = 0
    drops: dict[str, float] = field(default_factory=dict)
    """What the trainer refused, by reason."""
    messages: list[str] = field(default_factory=list)
    """The trainer's refusal messages (most recent last)."""

    @property
    def num_updates(self) -> int:
        """Batches that made a policy update (``updates`` holds every batch, those whose
        groups were all dropped too); what ``max_updates`` counts."""
        return sum(u.updated for u in self.updates)

    def failure(self) -> str | None:
        """Why the run failed when every one of its rollouts failed (naming the first
        error); None when one succeeded or none ran."""
        total = sum(u.rollouts for u in self.updates)
        if not total or sum(u.failed for u in self.updates) < total:
            return None
        first = next(u.first_error for u in self.updates if u.first_error)
        return f"every one of its {total} rollouts failed; the first: {first}"

    def __str__(self) -> str:
        """A line for the run, one per batch, and what the trainer dropped."""
        trained = self.num_updates
        lines = [
            f"run {self.run_id}: {len(self.updates)} batch{'' if len(self.updates) == 1 else 'es'}"
            f", {trained} update{'' if trained == 1 else 's'}, policy version {self.version}"
        ]
        lines += [f"  batch {i}: {u}" for i, u in enumerate(self.updates, 1)]
        lines.append(f"  {describe_drops(self.drops)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        """One line: the run, its batches and its version."""
        return (
            f"TrainReport(run_id={self.run_id!r}, batches={len(self.updates)}, "
            f"version={self.version}, drops={describe_drops(self.drops)!r})"
        )


def describe_drops(drops: Mapping[str, float]) -> str:
    """The trainer's drop counters for people: ``12 uniform episodes dropped, 1 duplicate
    episodes skipped``, or ``nothing dropped or refused``. A counter is named
    ``<verb>_<what>_<unit>`` (``dropped_uniform_episodes``)."""
    said = []
    for key, value in drops.items():
        if not value:
            continue
        verb, _, rest = key.partition("_")
        count = int(value) if float(value).is_integer() else value
        said.append(f"{count} {rest.replace('_', ' ')} {verb}")
    return ", ".join(said) or "nothing dropped or refused"
