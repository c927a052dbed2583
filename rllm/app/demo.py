"""The demos of ``make demo`` and ``make demo-agent``: an agent learning through the
whole pipeline, measured on held-out tasks before and after.

On a running stack: evaluate the served model on the held-out tasks, train on the others
(gateway -> Kafka -> processors -> trainer -> model server reload, a line per update),
evaluate the trained policy on the same held-out tasks, plot the training reward per
policy version. ``make demo`` learns ``multiply`` with the built-in chat agent; ``make
demo-agent`` (``agent="bash"``) learns generated shell tasks through a harness in
sandboxes (``rllm.app.demo_agent``). ``rllm-cli demo`` starts and stops the stack.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rllm.app.config import TrainConfig
from rllm.app.plot import plot_rewards
from rllm.app.report import TrainReport, UpdateRecord
from rllm.app.trainer import AgentTrainer
from rllm.errors import ConfigError, RllmError
from rllm.producers.evaluation import EvalSummary
from rllm.schemas.types import Task
from rllm.settings import KafkaSettings, default_home

__all__ = ["DemoConfig", "DemoReport", "held_out_split", "run_demo"]

BENCHMARK = "multiply"
"""The benchmark the demo learns: SmolLM2-135M goes from about 0.2 to above 0.9 on it in
a few minutes of RL on two cores."""


AGENT_MINUTES = 15.0
"""The agent demo's default training budget (``max_minutes``)."""


class DemoConfig(BaseModel):
    """What the demo runs; the defaults learn ``multiply`` in a few minutes on 2 cores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(default_factory=lambda: f"demo-{uuid.uuid4().hex[:8]}")
    """Training run id; the evaluations are ``<run_id>-before`` and ``<run_id>-after``."""
    gateway_url: str = "http://127.0.0.1:8400"
    """The gateway in front of the model server."""
    admin_key: str | None = None
    """The gateway's admin key (default: ``$RLLM_ADMIN_KEY``, else the stack's key file)."""
    model: str = "HuggingFaceTB/SmolLM2-135M-Instruct"
    """Model name the rollouts request (as served)."""
    trainer_model: str = ""
    """The trainer's weights (a local HF directory; '' = the local SmolLM2-135M copy)."""
    held_out: int = Field(default=20, ge=1)
    """Held-out tasks evaluated before and after (the first of the ``test`` split)."""
    max_updates: int = Field(default=120, ge=1)
    """Policy updates at most (updates made: a batch whose groups were all dropped as
    uniform makes none and does not count)."""
    max_minutes: float = Field(default=6.0, ge=0)
    """Start no new batch after this many minutes of training (0: no limit)."""
    target_reward: float = Field(default=0.95, ge=0, le=1)
    """Stop once the last ``window`` batches' mean training reward reaches this (0: never)."""
    window: int = Field(default=5, ge=1)
    """Batches the early stop averages over."""
    group_size: int = Field(default=8, ge=1)
    """Rollouts per task."""
    batch_size: int = Field(default=4, ge=1)
    """Tasks per update."""
    max_tokens: int = Field(default=48, ge=1)
    """Completion budget of every call, training and evaluation."""
    lr: float = Field(default=2e-5, gt=0)
    """AdamW learning rate."""
    checkpoint_dir: Path = Field(default_factory=lambda: default_home() / "demo" / "checkpoints")
    """Where the run's checkpoints go (the newest two are kept)."""
    plot: Path = Field(default_factory=lambda: default_home() / "demo" / "reward-curve.png")
    """The reward curve PNG."""
    update_timeout_s: float = Field(default=600.0, gt=0)
    """How long a batch waits for its update before the demo fails with a reason."""
    trainer: dict[str, Any] = Field(default_factory=dict)
    """More TrainerSettings fields (``uniform_reward``, ``torch_threads``, ...)."""

    # --- the agent demo (``agent`` set) -------------------------------------------------
    agent: str | None = None
    """None: the built-in chat agent on ``multiply``; a harness (``bash``): generated
    Harbor tasks run by it in sandboxes, rewarded by their verifiers."""
    family: str = "shell-basics"
    """The generated task family (``rllm-cli bench gen``)."""
    tasks: int = Field(default=120, ge=2)
    """Tasks generated (a quarter held out)."""
    seed: int = 0
    """The generator's seed."""
    max_turns: int = Field(default=2, ge=1)
    """Model calls of one harness run at most."""
    sandbox_backend: str | None = None
    """Where the harness runs (default: ``RLLM_SANDBOX_BACKEND``, else ``local``)."""

    @model_validator(mode="before")
    @classmethod
    def _agent_minutes(cls, data: Any) -> Any:
        """The agent demo trains for ``AGENT_MINUTES`` unless told otherwise."""
        if isinstance(data, dict) and data.get("agent") and "max_minutes" not in data:
            return {**data, "max_minutes": AGENT_MINUTES}
        return data


@dataclass
class DemoReport:
    """What the demo measured."""

    run_id: str
    held_out_ids: list[str]
    """Task ids evaluated before and after."""
    trained_ids: list[str]
    """Task ids training drew its batches from (the ``train`` split)."""
    before: EvalSummary
    after: EvalSummary
    train: TrainReport
    plot: Path
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each phase: before, train, after."""

    lesson: str = BENCHMARK
    """What was learnt (``multiply``, ``shell-basics with harness bash``)."""

    def line(self) -> str:
        """``held-out reward: before 0.200 -> after 0.950 (...)``."""
        return (
            f"held-out reward: before {self.before.mean_reward:.2f} -> after "
            f"{self.after.mean_reward:.2f} ({len(self.held_out_ids)} held-out {self.lesson} "
            f"tasks; policy {self.before.policy_label} -> {self.after.policy_label})"
        )


def held_out_split(held_out: int) -> tuple[list[Task], list[Task]]:
    """(train tasks, held-out tasks) of ``multiply``: its ``train`` split and the first
    ``held_out`` of its ``test`` split.

    Raises:
        ConfigError: more held-out tasks asked for than the test split has, or a task id
            in both (naming it).
    """
    from rllm.benchmarks.loaders import load_tasks

    test = load_tasks(BENCHMARK, split="test")
    if held_out > len(test):
        raise ConfigError(
            f"held_out {held_out} is more than the {len(test)} tasks of {BENCHMARK}'s test split"
        )
    train, test = load_tasks(BENCHMARK, split="train"), test[:held_out]
    both = sorted({t.task_id for t in train} & {t.task_id for t in test})
    if both:
        raise ConfigError(f"{BENCHMARK}: task ids in both train and test splits: {both}")
    return train, test


def run_demo(
    config: DemoConfig, kafka: KafkaSettings, say: Callable[[str], None] = print
) -> DemoReport:
    """Before, train, after, plot on the stack at ``config.gateway_url`` and ``kafka``.

    Raises:
        RllmError: an evaluation did not run on the policy it should have (the message
            names what was served); the stack's own errors (naming ``rllm-cli up``).
    """
    if config.agent is not None:
        return _run_agent_demo(config, kafka, say)
    from rllm.producers.sdk import builtin_agent

    train_tasks, test_tasks = held_out_split(config.held_out)
    trainer = AgentTrainer(
        builtin_agent("chat"),
        train_dataset=train_tasks,
        backend="local",
        config=_train_config(config),
        kafka=kafka,
    )
    return _before_train_after(
        config, trainer, BENCHMARK, test_tasks, lambda phase: _evaluate(config, phase, say), say
    )


def _run_agent_demo(
    config: DemoConfig, kafka: KafkaSettings, say: Callable[[str], None]
) -> DemoReport:
    """The agent demo: generated tasks, a harness in sandboxes, the verifiers' rewards."""
    from rllm.app.demo_agent import harness_lesson
    from rllm.producers.harnesses import verifier_evaluator

    assert config.agent is not None
    lesson = harness_lesson(
        harness=config.agent,
        family=config.family,
        count=config.tasks,
        held_out=config.held_out,
        seed=config.seed,
        max_turns=config.max_turns,
        max_tokens=config.max_tokens,
        temperature=1.0,
        run_id=config.run_id,
        sandbox_backend=config.sandbox_backend,
    )
    train_config = _train_config(config)

    def evaluate(phase: str) -> EvalSummary:
        say(f"evaluating {phase} training on {len(lesson.test)} held-out {lesson.name} tasks ...")
        summary = lesson.evaluate(train_config, f"{config.run_id}-{phase}")
        say(_summary_line(phase, summary))
        return summary

    try:
        trainer = AgentTrainer(
            lesson.rollout,
            evaluator=verifier_evaluator,
            train_dataset=lesson.train,
            backend="local",
            config=train_config,
            kafka=kafka,
        )
        return _before_train_after(config, trainer, lesson.name, lesson.test, evaluate, say)
    finally:
        lesson.close()


def _before_train_after(
    config: DemoConfig,
    trainer: AgentTrainer,
    lesson: str,
    test_tasks: list[Task],
    evaluate: Callable[[str], EvalSummary],
    say: Callable[[str], None],
) -> DemoReport:
    """Serve the base weights, evaluate, train, evaluate again, plot."""
    train_tasks = trainer.train_tasks
    trainer.check()
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    say(
        f"serving the base weights as version 0 of run {config.run_id} (the model server "
        f"may still serve an earlier run's policy) ..."
    )
    try:
        # The trainer loads the model once and keeps running from here into train(): the
        # "before" figure must not measure an earlier run's policy the server still serves.
        start = trainer.serve_start()
        before = evaluate("before")
        _expect_policy(before, config.run_id, start, "before")
        seconds["before"] = time.perf_counter() - began
        say(
            f"training on {len(train_tasks)} {lesson} tasks (the {len(test_tasks)} held "
            f"out are not among them): {config.batch_size} tasks x {config.group_size} "
            f"rollouts per update, at most {config.max_updates} updates or "
            f"{config.max_minutes:g} min"
        )
        began = time.perf_counter()
        report = trainer.train(on_update=_progress(config, say), progress=False)
    finally:
        trainer.close()
    seconds["train"] = time.perf_counter() - began
    began = time.perf_counter()
    after = evaluate("after")
    _expect_policy(after, config.run_id, report.version, "after")
    seconds["after"] = time.perf_counter() - began
    plot = plot_rewards(report, config.plot, f"{config.run_id}: {lesson}", before, after)
    return DemoReport(
        run_id=config.run_id,
        held_out_ids=[t.task_id for t in test_tasks],
        trained_ids=[t.task_id for t in train_tasks],
        before=before,
        after=after,
        train=report,
        plot=plot,
        seconds=seconds,
        lesson=lesson,
    )


def _train_config(config: DemoConfig) -> TrainConfig:
    batches = max(config.max_updates, 1)
    return TrainConfig(
        run_id=config.run_id,
        gateway_url=config.gateway_url,
        admin_key=config.admin_key,
        model=config.model,
        group_size=config.group_size,
        batch_size=config.batch_size,
        epochs=batches,  # max_updates, the time budget or the early stop ends it first
        max_updates=config.max_updates,
        max_minutes=config.max_minutes,
        update_timeout_s=config.update_timeout_s,
        sampling={"temperature": 1.0, "max_tokens": config.max_tokens},
        trainer={
            "model": config.trainer_model,
            "lr": config.lr,
            "precision": "fp32",  # bf16 is emulated on CPUs without bfloat16 instructions
            "checkpoint_dir": str(config.checkpoint_dir),
            "save_optimizer": False,
            "keep_checkpoints": 2,
            **config.trainer,
        },
    )


def _evaluate(config: DemoConfig, phase: str, say: Callable[[str], None]) -> EvalSummary:
    """The held-out tasks through the gateway, greedy, one attempt each."""
    from rllm.producers.evaluation import EvalConfig, run_eval

    eval_config = EvalConfig(
        benchmark=BENCHMARK,
        split="test",
        max_examples=config.held_out,
        gateway_url=config.gateway_url,
        admin_key=config.admin_key,
        model=config.model,
        agent="chat",
        concurrency=config.held_out,
        run_id=f"{config.run_id}-{phase}",
        sampling={"temperature": 0.0, "max_tokens": config.max_tokens},
    )
    say(f"evaluating {phase} training on {config.held_out} held-out {BENCHMARK} tasks ...")
    summary = asyncio.run(run_eval(eval_config))
    say(_summary_line(phase, summary))
    return summary


def _summary_line(phase: str, summary: EvalSummary) -> str:
    return (
        f"{phase}: mean reward {summary.mean_reward:.3f}, accuracy {summary.accuracy:.0%} "
        f"on {summary.tasks} tasks, policy version {summary.policy_label}, "
        f"{summary.seconds:.1f}s"
    )


def _expect_policy(summary: EvalSummary, run_id: str, version: int, phase: str) -> None:
    if (summary.policy_run, summary.policy_version) != (run_id, version):
        raise RllmError(
            f"the {phase} evaluation ran on policy {summary.policy_label}, not version "
            f"{version} of run {run_id}: its figure would not measure the {phase} policy"
        )


def _progress(config: DemoConfig, say: Callable[[str], None]) -> Callable[[UpdateRecord], bool]:
    """A line per batch (``batch 3, update 2/120: ...``: the updates made of
    ``max_updates``); stop once the last ``window`` batches reach ``target_reward``."""
    rewards: list[float] = []
    made = 0

    def on_update(record: UpdateRecord) -> bool:
        nonlocal made
        rewards.append(record.reward_mean)
        made += record.updated
        say(f"batch {len(rewards)}, update {made}/{config.max_updates}: {record}")
        recent = rewards[-config.window :]
        reached = len(recent) == config.window and sum(recent) / len(recent)
        if config.target_reward and reached is not False and reached >= config.target_reward:
            say(
                f"training reward {reached:.3f} over the last {config.window} batches "
                f"reached {config.target_reward:g}: stopping"
            )
            return False
        return True

    return on_update
