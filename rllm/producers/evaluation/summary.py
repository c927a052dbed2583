"""Pure summaries of an eval run: accuracy, unbiased pass@k, tokens, latency, errors."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

import numpy as np

from rllm.benchmarks.types import RewardResult
from rllm.errors import ConfigError
from rllm.producers.evaluation.served import ServedPolicy
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionStatus

__all__ = ["EvalSummary", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``c`` correct out of ``n`` samples (Chen et al.).

    Raises:
        ConfigError: ``k`` is more than ``n`` (a ``ValueError``).
    """
    if k > n:
        raise ConfigError(
            f"pass@{k} needs at least {k} samples, got {n}; run at least {k} attempts a task "
            f"or ask for a smaller k"
        )
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass(frozen=True)
class EvalSummary:
    """Figures of one eval run."""

    run_id: str
    benchmark: str
    model: str
    tasks: int
    attempts: int
    accuracy: float
    """Mean correctness over every attempt."""
    mean_reward: float
    pass_at: dict[int, float] = field(default_factory=dict)
    """pass@k by k, averaged over tasks."""
    errors: int = 0
    """Attempts whose agent raised or whose scoring failed, plus tasks that could not be
    loaded at all."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    steps: int = 0
    """LLM calls the gateway captured."""
    latency_p50_s: float = 0.0
    latency_p95_s: float = 0.0
    seconds: float = 0.0
    """Wall time of the whole run."""
    failures: list[dict[str, str]] = field(default_factory=list)
    """One ``{"task", "error"}`` per error counted in ``errors``: what went wrong, named."""
    policy_version: int | None = None
    """The policy version the gateway's upstream served when the eval started (the local
    model server's loaded version; None when not reported). Each step in the history
    carries the version of its own call."""
    policy_run: str | None = None
    """The training run of ``policy_version`` (None: the weights the server started with)."""
    substituted_images: dict[str, str] = field(default_factory=dict)
    """Task images (or their Dockerfile's ``FROM``) that ran on a substitute, asked-for ->
    used: results measured on another image than the benchmark's."""
    verifications: list[dict[str, Any]] = field(default_factory=list)
    """One per attempt whose verifier ran and gave less than full reward, or none: ``task``,
    ``reward`` (None: no reward), ``exit_code`` of ``tests/test.sh``, ``error`` (why no
    reward was read; None when one was) and ``output_tail`` (the end of test-stdout.txt), so
    a 0 carries its reason. Harbor task evals fill it."""

    @property
    def policy_label(self) -> str:
        """``policy_version`` for people: ``3 (run r)``, ``0 (base weights)`` or ``unknown``."""
        return ServedPolicy((), self.policy_version, self.policy_run).label

    def __str__(self) -> str:
        """The figures for people, a few lines (``print(trainer.evaluate())``)."""
        passes = "".join(f" · pass@{k} {v:.1%}" for k, v in self.pass_at.items() if k != 1)
        lines = [
            f"{self.benchmark} · {self.model} · run {self.run_id}",
            f"  {self.tasks} tasks x {self.attempts} attempt{'' if self.attempts == 1 else 's'}"
            f" · accuracy {self.accuracy:.1%}{passes} · mean reward {self.mean_reward:.3f}",
            f"  tokens in/out {self.prompt_tokens:,}/{self.completion_tokens:,} · "
            f"{self.steps} model calls · latency p50/p95 {self.latency_p50_s:.2f}s/"
            f"{self.latency_p95_s:.2f}s · {self.seconds:.1f}s",
            f"  {self.errors} error{'' if self.errors == 1 else 's'} · policy version "
            f"{self.policy_label}",
        ]
        shown = 5
        lines += [f"  error {f['task']}: {f['error']}" for f in self.failures[:shown]]
        if len(self.failures) > shown:
            lines.append(f"  ... and {len(self.failures) - shown} more errors")
        return "\n".join(lines + [f"  {line}" for line in self.notes(shown)])

    def notes(self, shown: int = 5) -> list[str]:
        """What the figures rest on, a line each: the image substitutes the tasks ran on and
        why the first ``shown`` verifications gave less than full reward (``verifications``)."""
        lines = [f"image {asked} ran as {used}" for asked, used in self.substituted_images.items()]
        for v in self.verifications[:shown]:
            reward = "no reward" if v.get("reward") is None else f"reward {v['reward']:g}"
            why = v.get("error") or _last_line(v.get("output_tail") or "") or "no output"
            lines.append(f"verifier {v['task']}: {reward} · exit {v.get('exit_code')} · {why}")
        if (more := len(self.verifications) - shown) > 0:
            lines.append(f"... and {more} more verification{'' if more == 1 else 's'}")
        return lines

    def __repr__(self) -> str:
        """One line: what ran and how it scored (every field: ``dataclasses.asdict``)."""
        return (
            f"EvalSummary(run_id={self.run_id!r}, benchmark={self.benchmark!r}, "
            f"model={self.model!r}, tasks={self.tasks}, attempts={self.attempts}, "
            f"accuracy={self.accuracy:.4g}, mean_reward={self.mean_reward:.4g}, "
            f"errors={self.errors}, seconds={self.seconds:.1f})"
        )


def _last_line(text: str, width: int = 120) -> str:
    """The last non-blank line of ``text``, cut to ``width`` characters."""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return last if len(last) <= width else last[: width - 1] + "…"


def summarize(
    run_id: str,
    benchmark: str,
    model: str,
    results: list[tuple[RolloutOutcome, RewardResult | None]],
    attempts: int,
    seconds: float,
    unloaded: Sequence[tuple[str, str]] = (),
) -> EvalSummary:
    """Summarise ``(outcome, reward)`` pairs; a None reward counts as an error, not correct.

    Args:
        unloaded: ``(task, error)`` of tasks that could not be loaded, so never ran: each
            is an error (listed in ``failures``), outside ``tasks`` and ``accuracy``.
    """
    correct_by_task: dict[str, list[bool]] = defaultdict(list)
    rewards_N, latencies_N = [], []
    failures = [{"task": task, "error": error} for task, error in unloaded]
    for outcome, reward in results:
        ok = reward is not None and bool(reward.is_correct)
        correct_by_task[outcome.task.task_id].append(ok)
        rewards_N.append(reward.reward if reward is not None else 0.0)
        latencies_N.append(outcome.seconds)
        if outcome.status is not SessionStatus.OK or reward is None:
            why = outcome.error or f"status {outcome.status.value}, no reward"
            failures.append({"task": outcome.task.task_id, "error": why})
    ks = sorted({1, attempts})
    pass_at = {
        k: float(np.mean([pass_at_k(len(v), sum(v), k) for v in correct_by_task.values()]))
        for k in ks
        if correct_by_task and all(len(v) >= k for v in correct_by_task.values())
    }
    flat = [c for v in correct_by_task.values() for c in v]
    return EvalSummary(
        run_id=run_id,
        benchmark=benchmark,
        model=model,
        tasks=len(correct_by_task),
        attempts=attempts,
        accuracy=float(np.mean(flat)) if flat else 0.0,
        mean_reward=float(np.mean(rewards_N)) if rewards_N else 0.0,
        pass_at=pass_at,
        errors=len(failures),
        prompt_tokens=sum(o.prompt_tokens for o, _ in results),
        completion_tokens=sum(o.completion_tokens for o, _ in results),
        steps=sum(o.num_steps for o, _ in results),
        latency_p50_s=float(np.percentile(latencies_N, 50)) if latencies_N else 0.0,
        latency_p95_s=float(np.percentile(latencies_N, 95)) if latencies_N else 0.0,
        seconds=seconds,
        failures=failures,
    )
