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
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rllm.app.config import TrainConfig, train_config
from rllm.app.report import TrainReport, UpdateRecord, describe_drops
from rllm.app.rollouts import dataset_tasks, epoch_batches, run_rollouts
from rllm.app.running import RunningTrainer
from rllm.consumers.trainer.settings import SyncMode
from rllm.errors import ConfigError, RllmError
from rllm.producers.evaluation import EvalSummary, summarize
from rllm.producers.evaluation.progress import ProgressLines, say
from rllm.producers.evaluation.served import ServedPolicy, check_served
from rllm.producers.sdk import Evaluator, Rollout
from rllm.schemas.types import Estimator, SessionStatus, Task
from rllm.settings import KafkaSettings

__all__ = ["AgentTrainer"]

log = logging.getLogger(__name__)


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
        self.train_tasks = dataset_tasks(train_dataset, "train_dataset")
        self.val_tasks = dataset_tasks(val_dataset, "val_dataset")
        self.val_name = val_dataset if isinstance(val_dataset, str) else "custom"
        """The benchmark name ``evaluate()``'s summary carries."""
        self.backend = backend
        self.kafka = kafka or KafkaSettings()
        self.config = train_config(config)
        self._started = time.perf_counter()
        """When the running train() began."""
        self._submitted = 0
        """Tasks the running train() has rolled out."""
        self._running: RunningTrainer | None = None
        """This run's trainer, from ``serve_start()`` (or ``train()``) to ``close()``."""
        self._trained = False
        """Whether ``train()`` ran (``evaluate()`` then measures ``latest`` by default)."""

    def trainer_settings(self) -> Any:
        """The TrainerSettings this run uses (refused here when the backend cannot honour
        them, before any rollout)."""
        from rllm.consumers.trainer.settings import TrainerSettings

        # In sync mode this driver holds new rollouts until the model server serves the
        # new version and has the trainer flush each batch (Trainer.flush_after), so
        # rollouts are on the trainer's version; a limit of 1 only keeps a batch whose
        # first requests raced the server's reload.
        trainer = self.config.trainer.model_dump(exclude_unset=True, exclude={"mode"})
        if self.config.mode is SyncMode.SYNC:
            trainer["max_staleness"] = 1
        fields = {
            "run_id": self.config.run_id,
            "backend": self.backend,
            "batch_size": self.config.batch_size,
            "mode": SyncMode.ASYNC,
            "group_id": f"rllm-trainer-{self.config.run_id}",
            "episode_run_ids": (self.config.run_id,),
            "poll_timeout_s": 0.2,
            **trainer,
        }
        return TrainerSettings(**fields)

    def evaluate(
        self, attempts: int = 1, progress: bool = True, policy: str | None = None
    ) -> EvalSummary:
        """Run the validation set through the gateway and summarise it.

        Args:
            attempts: rollouts per task (pass@k).
            progress: print a line on stderr when the run starts (naming the policy
                evaluated), about every tenth of its attempts, and at the end.
            policy: which policy answers: ``"base"`` (the weights the model server started
                with), ``"latest"`` (the newest policy a training run published) or
                ``"RUN:VERSION"``; default ``"base"`` before this trainer started (a
                baseline for its ``train()``) and ``"latest"`` once it has (``serve_start()``
                or ``train()``: what it serves or trained). The stack serves it for the
                evaluation, then the policy it served before (``rllm.app.hold``); a
                switch is refused while a run trains against the stack.

        Returns:
            The summary; ``print()`` it for a few lines of figures.

        Raises:
            ConfigError: no val_dataset; the gateway is down or serves another model; the
                policy names nothing that can be served, or a run is training.
        """
        from rllm.infra.admin_key import resolve_admin_key

        from .hold import served_for
        from .policy import parse_policy

        if not self.val_tasks:
            raise ConfigError("evaluate() needs a val_dataset")
        begun = self._trained or self._running is not None
        choice = parse_policy(policy or ("latest" if begun else "base"))
        self._check_sampling()
        served = self._served_policy()  # a stack that is down is one error naming rllm-cli up
        check_served(served, self.config.model, self.config.gateway_url)
        run_id = f"{self.config.run_id}-val"
        total = len(self.val_tasks) * attempts
        own = self.config.run_id if self._running is not None else None
        key = resolve_admin_key(self.config.admin_key)
        with served_for(
            choice,
            self.kafka,
            self.config.gateway_url,
            key,
            self.config.update_timeout_s,
            say if progress else None,
            own_run=own,
        ):
            served = self._served_policy()
            lines = ProgressLines(f"evaluate {run_id}", total) if progress else None
            if progress:
                say(
                    f"evaluate {run_id}: {len(self.val_tasks)} tasks x {attempts} attempt(s) "
                    f"of {self.config.model}, policy {choice.text}: version {served.label}, "
                    f"through {self.config.gateway_url}"
                )
            started = time.perf_counter()
            results = asyncio.run(
                run_rollouts(
                    self.config,
                    self.rollout,
                    self.evaluator,
                    self.val_tasks,
                    attempts,
                    run_id,
                    lines,
                )
            )
        summary = summarize(
            run_id,
            self.val_name,
            self.config.model,
            results,
            attempts,
            time.perf_counter() - started,
        )
        return replace(summary, policy_version=served.policy_version, policy_run=served.policy_run)

    def _served_policy(self) -> ServedPolicy:
        """What the gateway's upstream serves (its policy version).

        Raises:
            ConfigError: the gateway does not answer (naming ``rllm-cli up``).
        """
        from rllm.infra.admin_key import resolve_admin_key
        from rllm.producers.evaluation.served import served_policy

        key = resolve_admin_key(self.config.admin_key)
        return asyncio.run(served_policy(self.config.gateway_url, key))

    def check(self) -> Any:
        """Check the run before anything starts: a train dataset, settings and sampling the
        backend can honour; return the trainer's settings.

        Raises:
            ConfigError / CapabilityError: naming the setting.
        """
        from rllm.consumers.backends import backend_capabilities
        from rllm.consumers.trainer.types import check_capabilities, check_sampling

        if not self.train_tasks:
            raise ConfigError("train() needs a train_dataset")
        self._check_sampling()
        settings = self.trainer_settings()
        caps = backend_capabilities(settings.backend)
        check_capabilities(settings, settings.backend.value, caps)
        check_sampling(self.config.sampling, settings.backend.value, caps)
        return settings

    def _check_sampling(self) -> None:
        """Refuse sampling values the model server would answer with a 400 on every call.

        Raises:
            ConfigError: naming the field and its value.
        """
        from rllm.schemas.sampling import sampling_problem

        problem = sampling_problem(self.config.sampling)
        if problem is not None:
            raise ConfigError(
                f"sampling {problem}: every rollout's calls would be refused; fix the run's "
                f"sampling (rllm-cli train --temperature / --max-tokens)"
            )

    def serve_start(self) -> int:
        """Start this run's trainer (the backend loads once, here) and wait until the
        gateway serves the version it starts from: its base weights as version 0 on a fresh
        run, else the version it resumed from. A model server that served another run
        switches to this run's policy first, so what is sampled next (the first batch, or
        a "before" evaluation) is the policy being trained. ``train()`` calls it in sync
        mode; the trainer keeps running for ``train()`` until ``close()``.

        Returns:
            The policy version served.

        Raises:
            ConfigError / CapabilityError: a setting is bad or the backend cannot honour it.
            RllmError: the gateway did not take it within ``update_timeout_s``; the trainer's
                own failure.
        """
        run = self._start()
        version = run.trainer.version
        run.wait_served(version)
        return version

    def close(self) -> None:
        """Stop this run's trainer, if one runs (``train()`` does at its end)."""
        run, self._running = self._running, None
        if run is not None:
            run.close()

    def _start(self, progress: bool = False) -> RunningTrainer:
        """The running trainer; started (after the checks) if none runs."""
        if self._running is not None:
            return self._running
        from rllm.kafka import check_broker

        settings = self.check()
        check_broker(self.kafka, timeout_s=5.0)  # the stack answers before a model loads
        # rollouts of a model the upstream does not serve would be filed under its name
        now = self._served_policy()
        check_served(now, self.config.model, self.config.gateway_url)
        if progress:
            say(
                f"train {self.config.run_id}: {len(self.train_tasks)} tasks x "
                f"{self.config.group_size} rollouts, {self.config.batch_size} tasks per "
                f"update, {self.planned_batches()} batch(es); the gateway serves policy "
                f"version {now.label}; loading the {settings.backend.value} backend"
            )
        self._running = RunningTrainer.start(settings, self.kafka, self.config)
        return self._running

    def train(
        self,
        on_update: Callable[[UpdateRecord], bool | None] | None = None,
        progress: bool = True,
    ) -> TrainReport:
        """Run the RL loop; return the per-update record.

        Args:
            on_update: called with each batch's record as soon as it is known; returning
                False stops training there (an early stop of the caller's own).
            progress: print a line on stderr when the run starts and one per batch.

        Raises:
            ConfigError / CapabilityError: a setting is bad or the backend cannot honour it.
            RllmError: an update did not arrive within ``update_timeout_s`` (the message
                says what the trainer saw).
        """
        label = f"train {self.config.run_id}"
        try:
            run = self._start(progress)
            self._trained = True
            report = TrainReport(run_id=self.config.run_id, version=run.trainer.version)
            self._started, self._submitted = time.perf_counter(), 0
            if self.config.mode is SyncMode.SYNC:
                self.serve_start()
            batches = self.planned_batches()
            for batch in self._batches(run.settings.run_estimator()):
                if self._out_of_budget(report):
                    break
                record = self._one_batch(run, batch)
                report.updates.append(record)
                log.info("update %d: %s", len(report.updates), record)
                if progress:
                    say(f"{label}: batch {len(report.updates)}/{batches}: {record}")
                if on_update is not None and on_update(record) is False:
                    break
        finally:
            self.close()
        run.raise_failure()
        report.version = run.trainer.version
        report.drops = dict(run.trainer.report.drops)
        report.messages = list(run.trainer.report.messages)
        if progress:
            say(
                f"{label}: done after {len(report.updates)} batch(es) at policy version "
                f"{report.version}; {describe_drops(report.drops)}"
            )
        failure = report.failure() or run.trainer.report.all_refused()
        if failure is not None:
            raise RllmError(f"run {report.run_id}: {failure}")
        return report

    def planned_batches(self) -> int:
        """Batches ``train()`` runs unless ``max_updates`` (updates made, not batches: a
        batch whose groups were all dropped makes none), ``max_minutes`` or ``on_update``
        stops it first: every epoch's."""
        return math.ceil(len(self.train_tasks) / self.config.batch_size) * self.config.epochs

    def _batches(self, estimator: Estimator | None = None) -> Iterator[list[Task]]:
        """This run's batches of every epoch (``rollouts.epoch_batches``)."""
        return epoch_batches(
            self.train_tasks, self.config.batch_size, self.config.epochs, estimator
        )

    def _out_of_budget(self, report: TrainReport) -> bool:
        cfg = self.config
        if cfg.max_updates and report.num_updates >= cfg.max_updates:
            return True
        if not cfg.max_minutes:
            return False
        return time.perf_counter() - self._started >= cfg.max_minutes * 60

    def _one_batch(self, run: RunningTrainer, batch: list[Task]) -> UpdateRecord:
        """Roll out one batch, wait for its update (sync mode), and time both."""
        cfg, trainer = self.config, run.trainer
        began, version = time.perf_counter(), trainer.version
        results = asyncio.run(
            run_rollouts(cfg, self.rollout, self.evaluator, batch, cfg.group_size, cfg.run_id)
        )
        self._submitted += len(batch)
        rolled = time.perf_counter()
        if cfg.mode is SyncMode.SYNC:
            trainer.flush_after(self._submitted)  # this batch's groups, all that are kept
            run.wait_update(version, self._submitted)
        done = time.perf_counter()
        updated = trainer.version > version
        metrics = trainer.report.last_metrics if updated else {}
        failed = [o.error or o.status.value for o, _ in results if o.status is not SessionStatus.OK]
        rewards = [r.reward for _, r in results if r is not None]
        correct = [bool(r.is_correct) for _, r in results if r is not None]
        return UpdateRecord(
            version=trainer.version,
            rollout_version=version,
            reward_mean=float(np.mean(rewards)) if rewards else 0.0,
            accuracy=float(np.mean(correct)) if correct else 0.0,
            rollouts=len(results),
            seconds=done - began,
            rollout_s=rolled - began,
            update_s=done - rolled,
            train_s=float(metrics.get("train_s", 0.0)),
            checkpoint_s=float(metrics.get("checkpoint_s", 0.0)),
            completion_tokens=sum(o.completion_tokens for o, _ in results),
            prompt_tokens=sum(o.prompt_tokens for o, _ in results),
            elapsed_s=done - self._started,
            failed=len(failed),
            first_error=failed[0] if failed else None,
        )
