"""Follow ``rllm.policy-updates`` and load each new policy version into the engine.

Each server reads the whole topic with a consumer group of its own (every server must see
every update); when it has caught up it loads the policy the log points at
(``rllm.schemas.lineage``: the latest run's newest version), if it is not loaded yet; a
record of run "" has it serve the weights it started with again.
"""

from __future__ import annotations

import logging

from rllm.kafka import PolicyFollower as KafkaFollower
from rllm.schemas.lineage import BASE, PolicyPointer, advance
from rllm.schemas.policy import PolicyUpdated
from rllm.serving.engine import Engine
from rllm.settings import KafkaSettings

__all__ = ["PolicyFollower"]

log = logging.getLogger(__name__)


class PolicyFollower:
    """Reloads the engine with the policy ``rllm.policy-updates`` points at, once caught up
    (``rllm.kafka.PolicyFollower`` reads the log on its thread)."""

    def __init__(
        self, engine: Engine, kafka: KafkaSettings, run_id: str | None = None, poll_s: float = 0.5
    ) -> None:
        self.engine, self.kafka, self.run_id = engine, kafka, run_id
        self.reloads: list[tuple[int, float]] = []
        """(version, seconds) of every reload."""
        self._load_errors: list[str] = []
        self.loaded: PolicyPointer | None = None
        """The run and version the engine serves (None: the weights it started with)."""
        self._failed: set[PolicyPointer] = set()
        self._pointer: PolicyPointer | None = None
        self._newest: PolicyUpdated | None = None
        self._follower = KafkaFollower(kafka, self._on_updates, name="serve", poll_s=poll_s)

    @property
    def errors(self) -> list[str]:
        """Undecodable updates and policies that could not be loaded, oldest first."""
        return [*self._follower.errors, *self._load_errors]

    def start(self) -> PolicyFollower:
        """Start following."""
        self._follower.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the thread."""
        self._follower.stop()

    def _on_updates(self, updates: list[PolicyUpdated], caught_up: bool) -> None:
        for rec in updates:
            if self.run_id in (None, rec.run_id):
                moved = advance(self._pointer, rec)
                if moved != self._pointer:
                    self._pointer, self._newest = moved, rec
        pointer, newest = self._pointer, self._newest
        if newest is None or pointer == (self.loaded or BASE) or pointer in self._failed:
            return
        if caught_up:
            self._load(newest)

    def _load(self, rec: PolicyUpdated) -> None:
        try:
            if PolicyPointer.of(rec) == BASE:
                seconds = self.engine.load_base()
            else:
                seconds = self.engine.load_checkpoint(rec.checkpoint_uri, rec.version, rec.run_id)
        except (OSError, ValueError, RuntimeError) as exc:  # keep serving, keep following
            self._load_errors.append(
                f"policy {rec.run_id} version {rec.version} from {rec.checkpoint_uri}: {exc}"
            )
            log.error("cannot load %s", self._load_errors[-1])
            self._failed.add(PolicyPointer.of(rec))
            return
        self.loaded = PolicyPointer.of(rec)
        self.reloads.append((rec.version, seconds))
        log.info("loaded policy %s version %d in %.2fs", rec.run_id, rec.version, seconds)
