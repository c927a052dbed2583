"""Episodes to batches: uniform-reward groups, staleness and missing tokens are filtered
and counted here; the survivors become training sequences.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from rllm.consumers.trainer.errors import MissingTokensError, UnreproducibleSamplingError
from rllm.consumers.trainer.masking import check_tokens, trajectory_sequences
from rllm.consumers.trainer.settings import TrainerSettings, UniformPolicy
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainSequence
from rllm.consumers.trainer.whitening import BATCH_WHITENED, whiten_sequences
from rllm.schemas.run import RUN_ESTIMATOR_KEY
from rllm.schemas.types import EpisodeAssembled, Estimator

__all__ = ["Batcher", "DropCounts", "episode_sequences", "episode_staleness"]

log = logging.getLogger(__name__)


@dataclass
class DropCounts:
    """What the batcher refused, by reason."""

    stale_episodes: int = 0
    """Episodes with a step older than the staleness limit."""
    stale_steps: int = 0
    """Steps over the staleness limit in those episodes."""
    uniform_episodes: int = 0
    """Groups with all rewards equal that were dropped."""
    uniform_kept: int = 0
    """Groups with all rewards equal that were kept and trained (``uniform_reward=keep``)."""
    missing_tokens_episodes: int = 0
    """Episodes refused because a step had tokens=missing."""
    wrong_estimator_episodes: int = 0
    """Episodes refused because their advantages came from another estimator than the
    run's (``TrainerSettings.run_estimator``)."""
    unreproducible_sampling_episodes: int = 0
    """Episodes refused because a step was sampled in a way the backend cannot score
    (``UnreproducibleSamplingError``)."""
    empty_episodes: int = 0
    """Episodes without any trainable token."""
    duplicate_episodes: int = 0
    """Re-deliveries of an episode id already trained or pending (the processors deliver
    at least once; the first copy per event_id counts)."""
    messages: list[str] = field(default_factory=list)
    """The refusal messages (most recent last, at most 100)."""

    def note(self, message: str) -> None:
        """Record and log one refusal."""
        log.warning(message)
        self.messages = [*self.messages[-99:], message]

    def as_metrics(self) -> dict[str, float]:
        """The counters as PolicyUpdated metrics."""
        return {
            "dropped_stale_episodes": float(self.stale_episodes),
            "dropped_stale_steps": float(self.stale_steps),
            "dropped_uniform_episodes": float(self.uniform_episodes),
            "kept_uniform_episodes": float(self.uniform_kept),
            "refused_missing_tokens_episodes": float(self.missing_tokens_episodes),
            "refused_wrong_estimator_episodes": float(self.wrong_estimator_episodes),
            "refused_unreproducible_sampling_episodes": float(
                self.unreproducible_sampling_episodes
            ),
            "skipped_duplicate_episodes": float(self.duplicate_episodes),
        }


def episode_staleness(episode: EpisodeAssembled, current_version: int) -> list[int]:
    """Staleness (current version - dispatch version) of every captured step."""
    return [
        current_version - s.policy_version
        for t in episode.trajectories
        for s in t.steps
        if s.error is None
    ]


def _advantages(episode: EpisodeAssembled, loss: LossKind) -> list[float]:
    n = len(episode.trajectories)
    if loss in (LossKind.SFT, LossKind.DISTILL):
        return [1.0] * n
    if len(episode.advantages) != n:
        raise ValueError(
            f"episode {episode.event_id} has {n} trajectories but "
            f"{len(episode.advantages)} advantages"
        )
    return [float(a) for a in episode.advantages]


def episode_sequences(
    episode: EpisodeAssembled,
    loss: LossKind,
    merge_steps: bool = True,
    scored: frozenset[str] | None = None,
) -> list[TrainSequence]:
    """Every training sequence of an episode, each with its trajectory's advantage and
    its steps' sampling (``scored``: what the backend scores with; None: everything).

    Raises:
        MissingTokensError: if any step lacks token IDs (naming its session).
        UnreproducibleSamplingError: if a step was sampled as the backend cannot score.
    """
    for traj in episode.trajectories:
        check_tokens(traj)
    out: list[TrainSequence] = []
    for traj, adv in zip(episode.trajectories, _advantages(episode, loss), strict=True):
        out += trajectory_sequences(traj, episode.event_id, adv, merge_steps, scored)
    return out


class Batcher:
    """Accepts or refuses episodes and hands out full batches."""

    def __init__(
        self,
        settings: TrainerSettings,
        seen: Iterable[str] = (),
        scored: frozenset[str] | None = None,
    ) -> None:
        self.settings = settings
        self.scored = scored
        """Sampling parameters the backend scores with (``Capabilities.sampling``); None:
        every one ``rllm.models.sampling`` reproduces."""
        self.drops = DropCounts()
        self._episodes: list[EpisodeAssembled] = []
        self._sequences: list[TrainSequence] = []
        self._seen: set[str] = set(seen)

    def add(self, episode: EpisodeAssembled, current_version: int) -> bool:
        """Offer one episode; return whether it joined the pending batch.

        An episode id already trained or pending is skipped: the processors deliver at
        least once, and a copy carries the same content.
        """
        if episode.event_id in self._seen:
            self.drops.duplicate_episodes += 1
            return False
        self._seen.add(episode.event_id)
        s = self.settings
        limit = s.effective_max_staleness()
        stale = [x for x in episode_staleness(episode, current_version) if x > limit]
        if stale:
            self.drops.stale_episodes += 1
            self.drops.stale_steps += len(stale)
            self.drops.note(
                f"episode {episode.event_id}: {len(stale)} step(s) up to "
                f"{max(stale)} versions old (limit {limit}, current version "
                f"{current_version}); dropped"
            )
            return False
        expected = s.run_estimator()
        if expected is not None and episode.estimator != expected:
            self.drops.wrong_estimator_episodes += 1
            self.drops.note(
                f"refused episode {episode.event_id} of run {episode.run_id!r}: its "
                f"advantages come from estimator {episode.estimator!r}, but this run's "
                f"loss={s.loss.value} trains on {expected!r}; start the run with estimator "
                f"{expected!r} (the processors' RLLM_ESTIMATOR or the run's task metadata "
                f"{RUN_ESTIMATOR_KEY!r}), or train on {episode.estimator!r} "
                f"(RLLM_TRAIN_ESTIMATOR)"
            )
            return False
        # Only group-centred estimators give a uniform group zero advantages; the
        # REINFORCE++ ones are whitened over the batch, where such a group still counts.
        centred = expected in (Estimator.GRPO, Estimator.RLOO)
        if centred and (episode.uniform_reward or len(set(episode.rewards)) <= 1):
            if s.uniform_reward is UniformPolicy.DROP:
                self.drops.uniform_episodes += 1
                return False
            self.drops.uniform_kept += 1
        try:
            seqs = episode_sequences(episode, s.loss, s.merge_steps, self.scored)
        except MissingTokensError as exc:
            self.drops.missing_tokens_episodes += 1
            self.drops.note(f"refused episode {episode.event_id} for training: {exc}")
            return False
        except UnreproducibleSamplingError as exc:
            self.drops.unreproducible_sampling_episodes += 1
            self.drops.note(f"refused episode {episode.event_id} for training: {exc}")
            return False
        if not seqs:
            self.drops.empty_episodes += 1
            return False
        self._episodes.append(episode)
        self._sequences += seqs
        return True

    @property
    def pending(self) -> int:
        """Episodes waiting in the current batch."""
        return len(self._episodes)

    def ready(self) -> bool:
        """Whether a full batch is pending."""
        return len(self._episodes) >= self.settings.batch_size

    def take(self) -> TrainBatch:
        """The pending batch (may be partial); the batcher starts empty again."""
        if self.settings.run_estimator() in BATCH_WHITENED and self._sequences:
            whiten_sequences(self._sequences)
        batch = TrainBatch(
            sequences=self._sequences,
            episode_ids=[e.event_id for e in self._episodes],
            rewards=[float(r) for e in self._episodes for r in e.rewards],
        )
        self._episodes, self._sequences = [], []
        return batch
