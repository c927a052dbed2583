"""``rllm-cli eval``: run an agent on a benchmark through the gateway, score every attempt,
publish the rewards, and summarise. Every call and reward lands on Kafka under the run id.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rllm.benchmarks.loaders import load_tasks
from rllm.benchmarks.registry import get_benchmark
from rllm.benchmarks.types import RewardResult
from rllm.infra.admin_key import resolve_admin_key
from rllm.producers.evaluation.progress import say
from rllm.producers.evaluation.served import check_served, policy_line, served_policy
from rllm.producers.evaluation.summary import EvalSummary, summarize
from rllm.producers.sdk.agents import builtin_agent
from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.evaluator import Evaluator, reward_fn_evaluator
from rllm.producers.sdk.rollout import Rollout
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionEvent, Task

__all__ = ["EvalConfig", "Progress", "run_eval", "run_tasks", "write_results"]

Progress = Callable[[RolloutOutcome, RewardResult | None], None]


@dataclass(frozen=True)
class EvalConfig:
    """One eval run."""

    benchmark: str
    """Benchmark name or alias, or a directory of Harbor task folders."""
    gateway_url: str
    """Root URL of the gateway the agent's calls go through."""
    model: str
    """Model name requested from the upstream."""
    admin_key: str | None = None
    """The gateway's admin key, if it has one."""
    agent: str | None = None
    """Built-in agent; default: the benchmark's. On Harbor tasks: the harness's name."""
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
    policy: str | None = None
    """The policy asked for (``base``, ``latest``, ``RUN:VERSION``; ``rllm.app.evaluate``
    serves it), named in the run's first line; None: whatever the stack serves."""

    # --- Harbor task directories (run by a harness in sandboxes) ----------------------
    tasks_dir: Path | None = None
    """Harbor task folders for an agentic benchmark (``terminal_bench2``, ...)."""
    sandbox_backend: str | None = None
    """Sandbox backend of the harness runs; None: ``RLLM_SANDBOX_BACKEND`` (local)."""
    agent_timeout_multiplier: float = 1.0
    """Scales every task's ``[agent] timeout_sec``."""
    verifier_timeout_multiplier: float = 1.0
    """Scales every task's ``[verifier] timeout_sec``."""
    artifacts_dir: Path | None = None
    """Where the harnesses' own log files are kept (``<dir>/<session>/``); None: not kept."""
    image_substitutes: dict[str, str] = field(default_factory=dict)
    """Images used instead of others (``--image-substitute``), on top of
    ``RLLM_SANDBOX_IMAGE_SUBSTITUTES``; the summary names those a task used."""


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

    A directory of Harbor task folders (``benchmark`` itself, or ``tasks_dir``) runs under
    the harness ``agent`` (``rllm.producers.evaluation.harbor``).

    Raises:
        UnknownBenchmarkError, DatasetRowError, DatasetUnavailableError, ConfigError:
            before any agent runs; ConfigError also when the gateway's upstream does not
            serve ``config.model`` (the summary names the policy version it serves).
    """
    from rllm.producers.evaluation.harbor import run_harbor_eval, tasks_dir_of

    tasks_dir = tasks_dir_of(config)
    if tasks_dir is not None:
        return await run_harbor_eval(config, tasks_dir, progress, on_tasks)
    spec = get_benchmark(config.benchmark)
    agent = builtin_agent(config.agent or spec.agent)  # bad input first, then the stack
    tasks = load_tasks(
        spec, split=config.split, data_file=config.data_file, max_examples=config.max_examples
    )
    served = await served_policy(config.gateway_url, resolve_admin_key(config.admin_key))
    check_served(served, config.model, config.gateway_url)
    if progress is not None:  # which policy this eval measures, before any result
        say(policy_line(config.run_id, config.model, served, config.policy))
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
    summary = replace(summary, policy_version=served.policy_version, policy_run=served.policy_run)
    if config.output is not None:
        write_results(config.output, results)
    return summary


def write_results(path: Path, results: list[tuple[RolloutOutcome, RewardResult | None]]) -> None:
    """One JSON line per attempt: its outcome (no task record), status and reward."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for outcome, reward in results:
            row = {k: v for k, v in asdict(outcome).items() if k != "task"}
            row["task_id"] = outcome.task.task_id
            row["status"] = outcome.status.value
            row["reward"] = None if reward is None else asdict(reward)
            fh.write(json.dumps(row, default=str) + "\n")
