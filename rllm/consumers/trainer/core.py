"""``TrainerCore``: one policy update on a batch, checkpointed, and the ``PolicyUpdated``
that announces it; what every trainer shares (the episode consumer, the whole loop's
trainer, SFT on a file, perf's in-process loop), without Kafka.

Order of one update: backend.update, write the checkpoint (weights, the caller's position
in its input, the update's history entry), then hand back the event for the caller to
publish. A run resumes from its latest checkpoint when the core is built.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rllm.consumers.trainer.batching import Batcher
from rllm.consumers.trainer.checkpoint import CheckpointState, CheckpointStore
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import TrainBatch, TrainingBackend, UpdateResult
from rllm.schemas.ids import policy_updated
from rllm.schemas.policy import PolicyUpdated

__all__ = ["FaultHook", "TrainerCore"]

log = logging.getLogger(__name__)

FaultHook = Callable[[str, int], None]
"""Called as ``hook(point, version)`` at after_update, after_checkpoint, after_publish,
after_commit; tests use it to kill the process between update and commit."""


class TrainerCore:
    """Batches, updates and checkpoints of one run, resumed from its latest checkpoint."""

    def __init__(self, settings: TrainerSettings, backend: TrainingBackend) -> None:
        self.settings = settings
        self.backend = backend
        caps = getattr(backend, "capabilities", None)
        self.scored: frozenset[str] | None = caps.sampling if caps is not None else None
        """Sampling parameters the backend scores with (``Capabilities.sampling``)."""
        self.batcher = Batcher(settings, scored=self.scored)
        self.store = CheckpointStore(
            settings.checkpoint_dir, settings.run_id, settings.keep_checkpoints
        )
        self.state = CheckpointState(run_id=settings.run_id, base_model=backend.base_model)
        found = self.store.latest()
        self.resumed = found is not None
        """Whether a checkpoint of this run was found (else the run starts fresh)."""
        if found is not None:
            path, self.state = found
            backend.load(path, self.state.version)
            log.info("resumed from %s (version %d)", path, self.state.version)
            self.batcher = Batcher(
                settings, seen=self.state.trained_episode_ids(), scored=self.scored
            )

    @property
    def version(self) -> int:
        """Current policy version."""
        return self.backend.version

    def write_base(self) -> None:
        """Checkpoint the starting weights as version 0 of a fresh run, so that model
        servers that served another run switch to this run's base policy."""
        started = time.perf_counter()
        self.store.write(self.state, self.backend.save)
        self.state.metrics = {"checkpoint_s": time.perf_counter() - started}
        self.resumed = True

    def train_pending(
        self, offsets: dict[str, dict[str, int]], fault: FaultHook | None = None
    ) -> tuple[UpdateResult, PolicyUpdated]:
        """Update on the batcher's pending batch and write a checkpoint holding the
        episode ``offsets`` it was consumed up to."""
        batch = self.batcher.take()
        metrics: dict[str, float] = {}
        if batch.rewards:
            metrics["reward_mean"] = sum(batch.rewards) / len(batch.rewards)
        metrics.update(self.batcher.drops.as_metrics())
        return self.update(batch, offsets, {"episode_ids": batch.episode_ids}, metrics, fault)

    def update(
        self,
        batch: TrainBatch,
        offsets: dict[str, dict[str, int]],
        entry: dict[str, Any],
        metrics: dict[str, float] | None = None,
        fault: FaultHook | None = None,
    ) -> tuple[UpdateResult, PolicyUpdated]:
        """Update on ``batch`` and checkpoint the new weights.

        Args:
            batch: The sequences to train on.
            offsets: Where the run's input stands after this batch (the checkpoint keeps
                it, so a restart resumes after the batch).
            entry: The update's history entry (after its ``version``): what it trained on.
            metrics: More metrics of the update, after the backend's.
            fault: Called after the update and after the checkpoint (tests).

        Returns:
            The backend's result and the ``PolicyUpdated`` to publish.
        """
        result = self.backend.update(batch)
        if fault:
            fault("after_update", result.version)
        merged = {**result.metrics, **(metrics or {})}
        self.state = CheckpointState(
            version=result.version,
            offsets=offsets,
            history=[*self.state.history, {"version": result.version, **entry}],
            run_id=self.settings.run_id,
            base_model=self.backend.base_model,
            metrics=merged,
        )
        started = time.perf_counter()
        self.store.write(self.state, self.backend.save)
        merged["checkpoint_s"] = time.perf_counter() - started
        if fault:
            fault("after_checkpoint", result.version)
        return result, self.policy_event(len(batch.episode_ids), batch.num_tokens, merged)

    def policy_event(
        self, num_episodes: int = 0, num_tokens: int = 0, metrics: dict[str, float] | None = None
    ) -> PolicyUpdated:
        """PolicyUpdated for the current checkpoint (its metrics unless given)."""
        return policy_updated(
            self.settings.run_id,
            self.state.version,
            self.state.checkpoint_uri,
            base_model=self.backend.base_model,
            backend=self.backend.name,
            metrics=metrics if metrics is not None else self.state.metrics,
            num_episodes=num_episodes,
            num_tokens=num_tokens,
        )
