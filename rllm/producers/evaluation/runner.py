"""``rllm-cli eval``: run an agent on a benchmark through the gateway, score every attempt,
publish the rewards, and summarise. Every call and reward lands on Kafka under the run id.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rllm.benchmarks.loaders import load_tasks
from rllm.benchmarks.registry import get_benchmark
from rllm.benchmarks.types import RewardResult
from rllm.producers.evaluation.summary import EvalSummary, summarize
from rllm.producers.sdk.agents import builtin_agent
from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.evaluator import Evaluator, reward_fn_evaluator
from rllm.producers.sdk.rollout import Rollout
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionEvent, Task

__all__ = ["EvalConfig", "run_eval", "run_tasks"]

Progress = Callable[[RolloutOutcome, RewardResult | None], None]


@dataclass(frozen=True)
class EvalConfig:
    """One eval run."""

    benchmark: str
    """Benchmark name or alias."""
    gateway_url: str
    """Root URL of the gateway the agent's calls go through."""
    model: str
    """Model name requested from the upstream."""
    admin_key: str | None = None
    """The gateway's admin key, if it has one."""
    agent: str | None = None
    """Built-in agent; default: the benchmark's."""
    attempts: int = 1
    """Samples per task (pass@k)."""
    concurrency: int = 8
    """Agent runs in flight."""
    max_examples: int | None = None
    """Only the first N tasks."""
    split: str | None = None
    """Dataset split; default: the benchmark's."""
    data_file: Path | None = None
    """Local JSONL/Parquet file instead of the dataset source."""
    output: Path | None = None
    """Write one JSON line per attempt here."""
    run_id: str = field(default_factory=lambda: f"eval-{uuid.uuid4().hex[:10]}")
    """Run id every event carries."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters for the agent's calls."""


async def run_tasks(
    tasks: list[Task],
    agent: Rollout,
    gateway: GatewayClient,
    *,
    run_id: str,
    model: str,
    attempts: int = 1,
    concurrency: int = 8,
    sampling: dict[str, Any] | None = None,
    evaluator: Evaluator | None = None,
    progress: Progress | None = None,
) -> list[tuple[RolloutOutcome, RewardResult | None]]:
    """Run ``agent`` ``attempts`` times on every task; score with ``evaluator`` or each
    task's reward function; publish RewardAssigned; keep going when an attempt fails."""
    semaphore = asyncio.Semaphore(concurrency)
    evaluators: dict[str, Evaluator] = {}

    def scorer_for(task: Task) -> Evaluator | None:
        if evaluator is not None:
            return evaluator
        if not task.reward_fn:
            return None
        if task.reward_fn not in evaluators:
            evaluators[task.reward_fn] = reward_fn_evaluator(task.reward_fn)
        return evaluators[task.reward_fn]

    async def one(task: Task, index: int) -> tuple[RolloutOutcome, RewardResult | None]:
        scorer = scorer_for(task)
        scored: list[RewardResult] = []
        failure: list[str] = []

        async def score(outcome: RolloutOutcome) -> list[SessionEvent] | None:
            # scored before the session closes: RewardAssigned goes with the close request
            if scorer is None:
                return None
            try:
                reward = await scorer.score(task, outcome)
                event = scorer.event(outcome, reward)
            except Exception as exc:  # scoring failures are counted, the run goes on
                failure.append(f"scoring failed: {type(exc).__name__}: {exc}")
                return None
            scored.append(reward)
            return [event]

        async with semaphore:
            outcome = await agent.run(
                task,
                gateway,
                run_id=run_id,
                model=model,
                sampling=sampling,
                rollout_index=index,
                group_size=attempts,
                before_close=score,
            )
        if failure:
            outcome = _with_error(outcome, failure[0])
        reward = scored[0] if scored else None
        if progress is not None:
            progress(outcome, reward)
        return outcome, reward

    jobs = [one(task, i) for task in tasks for i in range(attempts)]
    return list(await asyncio.gather(*jobs))


def _with_error(outcome: RolloutOutcome, error: str) -> RolloutOutcome:
    from dataclasses import replace

    return replace(outcome, error=(outcome.error + "; " if outcome.error else "") + error)


async def run_eval(
    config: EvalConfig,
    progress: Progress | None = None,
    on_tasks: Callable[[int], None] | None = None,
) -> EvalSummary:
    """Load the benchmark, run it through the gateway, write ``output``, return the summary.

    Raises:
        UnknownBenchmarkError, DatasetRowError, DatasetUnavailableError, ConfigError:
            before any agent runs.
    """
    spec = get_benchmark(config.benchmark)
    tasks = load_tasks(
        spec, split=config.split, data_file=config.data_file, max_examples=config.max_examples
    )
    agent = builtin_agent(config.agent or spec.agent)
    if on_tasks is not None:
        on_tasks(len(tasks) * config.attempts)
    gateway = GatewayClient(config.gateway_url, config.admin_key)
    started = time.perf_counter()
    try:
        results = await run_tasks(
            tasks,
            agent,
            gateway,
            run_id=config.run_id,
            model=config.model,
            attempts=config.attempts,
            concurrency=config.concurrency,
            sampling=config.sampling,
            progress=progress,
        )
    finally:
        await gateway.aclose()
    summary = summarize(
        config.run_id,
        spec.name,
        config.model,
        results,
        config.attempts,
        time.perf_counter() - started,
    )
    if config.output is not None:
        _write(config.output, results)
    return summary


def _write(path: Path, results: list[tuple[RolloutOutcome, RewardResult | None]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for outcome, reward in results:
            row = {k: v for k, v in asdict(outcome).items() if k != "task"}
            row["task_id"] = outcome.task.task_id
            row["status"] = outcome.status.value
            row["reward"] = None if reward is None else asdict(reward)
            fh.write(json.dumps(row, default=str) + "\n")
