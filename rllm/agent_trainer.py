"""``AgentTrainer``: the same ``@rllm.rollout`` agent that drives evaluation, trained with RL.

The loop is the event pipeline itself: rollouts go through the gateway (``SessionOpened``,
``StepCaptured``, ``RewardAssigned``, ``SessionClosed``), the processors turn them into
episodes, a trainer consumer in this process updates the policy and publishes
``PolicyUpdated``, and the model server and the gateway take the new version. In ``sync``
mode the next batch of rollouts waits for the gateway to serve the new version.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rllm.benchmarks.types import RewardResult
from rllm.errors import ConfigError, RllmError
from rllm.producers.evaluation import EvalSummary, run_tasks, summarize
from rllm.producers.sdk import Evaluator, GatewayClient, Rollout, RolloutOutcome
from rllm.schemas.types import Task
from rllm.settings import KafkaSettings

__all__ = ["AgentTrainer", "TrainConfig", "TrainReport", "UpdateRecord"]

log = logging.getLogger(__name__)


class TrainConfig(BaseModel):
    """How ``AgentTrainer`` runs rollouts and the trainer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(default_factory=lambda: f"train-{uuid.uuid4().hex[:10]}")
    """Run id of every rollout and of the policy updates."""
    gateway_url: str = "http://127.0.0.1:8400"
    """The gateway in front of the model server (``rllm-cli up`` starts both)."""
    admin_key: str | None = None
    """The gateway's admin key, if it has one."""
    model: str = "HuggingFaceTB/SmolLM2-135M-Instruct"
    """Model name the rollouts request (as served)."""
    group_size: int = Field(default=8, ge=1)
    """Rollouts per task (the GRPO group)."""
    batch_size: int = Field(default=4, ge=1)
    """Tasks per policy update."""
    epochs: int = Field(default=1, ge=1)
    """Passes over the training set."""
    max_updates: int = Field(default=0, ge=0)
    """Stop after this many updates (0: after the epochs)."""
    mode: str = "sync"
    """sync: each batch of rollouts waits for the previous update; async: bounded
    off-policy (the trainer's max_staleness)."""
    sampling: dict[str, Any] = Field(default_factory=lambda: {"temperature": 1.0})
    """Sampling parameters of the rollouts."""
    concurrency: int = Field(default=16, ge=1)
    """Rollouts in flight."""
    update_timeout_s: float = Field(default=900.0, gt=0)
    """How long a batch waits for its update before the run fails with a reason."""
    trainer: dict[str, Any] = Field(default_factory=dict)
    """More TrainerSettings fields (lr, loss, loss_agg, kl_coef, model, checkpoint_dir, ...)."""


@dataclass(frozen=True)
class UpdateRecord:
    """One batch of rollouts and the update it fed."""

    version: int
    """Policy version after the update (unchanged when the batch was dropped)."""
    reward_mean: float
    """Mean reward of the batch's rollouts."""
    accuracy: float
    """Share of correct rollouts."""
    rollouts: int
    """Rollouts in the batch."""
    seconds: float
    """Wall time of rollouts plus update."""


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


def _tasks(dataset: Sequence[Task] | str | None, what: str) -> list[Task]:
    if dataset is None:
        return []
    if isinstance(dataset, str):
        from rllm.benchmarks.loaders import load_tasks

        return load_tasks(dataset)
    tasks = list(dataset)
    bad = [i for i, t in enumerate(tasks) if not isinstance(t, Task)]
    if bad:
        raise ConfigError(f"{what}[{bad[0]}] is a {type(tasks[bad[0]]).__name__}, not a Task")
    return tasks


class AgentTrainer:
    """Train an ``@rllm.rollout`` agent on a dataset with any backend.

    Args:
        rollout: the agent (``@rllm.rollout``).
        evaluator: its scorer (``@rllm.evaluator``); default: each task's reward function.
        train_dataset: tasks, or a benchmark name.
        val_dataset: tasks or a benchmark name for ``evaluate()``.
        backend: ``local`` (default), ``verl``, ``tinker`` or ``fireworks``.
        config: a TrainConfig or a dict of its fields.
        kafka: where the topics are (default: ``RLLM_*`` environment).
    """

    def __init__(
        self,
        rollout: Rollout,
        evaluator: Evaluator | None = None,
        train_dataset: Sequence[Task] | str | None = None,
        val_dataset: Sequence[Task] | str | None = None,
        backend: str = "local",
        config: TrainConfig | dict[str, Any] | None = None,
        kafka: KafkaSettings | None = None,
    ) -> None:
        if not isinstance(rollout, Rollout):
            raise ConfigError(f"rollout must be an @rllm.rollout function, got {rollout!r}")
        self.rollout = rollout
        self.evaluator = evaluator
        self.train_tasks = _tasks(train_dataset, "train_dataset")
        self.val_tasks = _tasks(val_dataset, "val_dataset")
        self.backend = backend
        self.kafka = kafka or KafkaSettings()
        self.config = config if isinstance(config, TrainConfig) else TrainConfig(**(config or {}))
        if self.config.mode not in ("sync", "async"):
            raise ConfigError(f"mode must be sync or async, got {self.config.mode!r}")

    def trainer_settings(self) -> Any:
        """The TrainerSettings this run uses (refused here when the backend cannot honour
        them, before any rollout)."""
        from rllm.consumers.trainer.settings import TrainerSettings

        # In sync mode this driver holds new rollouts until the gateway serves the new
        # version, so rollouts are at most one version behind the trainer; a batch that
        # straddles an update (dropped uniform groups leave it partial) must not be refused
        # as stale, so the trainer itself runs with a staleness limit of 1.
        trainer = {k: v for k, v in self.config.trainer.items() if k != "mode"}
        if self.config.mode == "sync":
            trainer["max_staleness"] = 1
        fields = {
            "run_id": self.config.run_id,
            "backend": self.backend,
            "batch_size": self.config.batch_size,
            "mode": "async",
            "group_id": f"rllm-trainer-{self.config.run_id}",
            "episode_run_ids": (self.config.run_id,),
            "poll_timeout_s": 0.2,
            **trainer,
        }
        return TrainerSettings(**fields)

    def evaluate(self, attempts: int = 1) -> EvalSummary:
        """Run the validation set once through the gateway and summarise it."""
        if not self.val_tasks:
            raise ConfigError("evaluate() needs a val_dataset")
        started = time.perf_counter()
        results = asyncio.run(self._run(self.val_tasks, attempts, f"{self.config.run_id}-val"))
        return summarize(
            f"{self.config.run_id}-val",
            "custom",
            self.config.model,
            results,
            attempts,
            time.perf_counter() - started,
        )

    async def _run(
        self, tasks: list[Task], attempts: int, run_id: str
    ) -> list[tuple[RolloutOutcome, RewardResult | None]]:
        gateway = GatewayClient(self.config.gateway_url, self.config.admin_key)
        try:
            return await run_tasks(
                tasks,
                self.rollout,
                gateway,
                run_id=run_id,
                model=self.config.model,
                attempts=attempts,
                concurrency=self.config.concurrency,
                sampling=self.config.sampling,
                evaluator=self.evaluator,
            )
        finally:
            await gateway.aclose()

    def train(self) -> TrainReport:
        """Run the RL loop; return the per-update record.

        Raises:
            ConfigError / CapabilityError: a setting is bad or the backend cannot honour it.
            RllmError: an update did not arrive within ``update_timeout_s`` (the message
                says what the trainer saw).
        """
        from rllm.consumers.backends import make_backend
        from rllm.consumers.trainer.loop import Trainer

        if not self.train_tasks:
            raise ConfigError("train() needs a train_dataset")
        cfg = self.config
        settings = self.trainer_settings()
        trainer = Trainer(settings, self.kafka, make_backend(settings))
        failure: list[BaseException] = []

        def run_trainer() -> None:
            try:
                trainer.run()
            except BaseException as exc:  # surfaced by the driver below
                failure.append(exc)

        thread = threading.Thread(target=run_trainer, name="rllm-trainer", daemon=True)
        thread.start()
        report = TrainReport(run_id=cfg.run_id, version=trainer.core.version)
        submitted = 0
        try:
            for _epoch in range(cfg.epochs):
                for start in range(0, len(self.train_tasks), cfg.batch_size):
                    if cfg.max_updates and len(report.updates) >= cfg.max_updates:
                        break
                    batch = self.train_tasks[start : start + cfg.batch_size]
                    began, version = time.perf_counter(), trainer.core.version
                    results = asyncio.run(self._run(batch, cfg.group_size, cfg.run_id))
                    submitted += len(batch)
                    if cfg.mode == "sync":
                        self._wait(trainer, version, submitted, failure)
                    rewards = [r.reward for _, r in results if r is not None]
                    correct = [bool(r.is_correct) for _, r in results if r is not None]
                    report.updates.append(
                        UpdateRecord(
                            version=trainer.core.version,
                            reward_mean=float(np.mean(rewards)) if rewards else 0.0,
                            accuracy=float(np.mean(correct)) if correct else 0.0,
                            rollouts=len(results),
                            seconds=time.perf_counter() - began,
                        )
                    )
                    log.info("update %d: %s", len(report.updates), report.updates[-1])
        finally:
            trainer.stop()
            thread.join(timeout=120)
        if failure:
            raise failure[0]
        report.version = trainer.core.version
        report.drops = trainer.core.batcher.drops.as_metrics()
        report.messages = list(trainer.core.batcher.drops.messages)
        return report

    def _wait(
        self, trainer: Any, version: int, submitted: int, failure: list[BaseException]
    ) -> None:
        """Until the trainer published a newer version and the gateway serves it, or the
        trainer consumed every submitted episode without an update (dropped groups)."""
        deadline = time.monotonic() + self.config.update_timeout_s
        while time.monotonic() < deadline:
            if failure:
                raise failure[0]
            if trainer.core.version > version:
                if self._gateway_version() >= trainer.core.version:
                    return
            elif trainer.report.episodes_settled - trainer.report.other_runs >= submitted:
                return  # consumed without an update (dropped groups, partial batch): go on
            time.sleep(0.2)
        raise RllmError(
            f"no policy update within {self.config.update_timeout_s:.0f} s: the trainer consumed "
            f"{trainer.report.episodes_consumed} of {submitted} episodes at version "
            f"{trainer.core.version}; are the processors running (rllm-cli up)?"
        )

    def _gateway_version(self) -> int:
        try:
            resp = httpx.get(f"{self.config.gateway_url}/admin/policy", timeout=5)
            return int(resp.json().get("policy_version", 0))
        except (httpx.HTTPError, ValueError):
            return -1
