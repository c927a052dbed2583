"""Harbor task directories as an eval dataset: ``rllm-cli eval DIR --agent NAME`` and
``rllm-cli eval terminal_bench2 --tasks-dir DIR``. Each task runs in its own sandbox under a
harness (``rllm.producers.harnesses``), its verifier gives the reward, and the run is
summarised like every eval. A folder that does not load is an error of the summary, named;
the other tasks go on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rllm.benchmarks.errors import UnknownBenchmarkError
from rllm.benchmarks.harbor import HarborDataset, HarborTask, load_dataset, task_dirs
from rllm.benchmarks.registry import get_benchmark
from rllm.benchmarks.types import BenchmarkSpec, Need
from rllm.errors import ConfigError
from rllm.infra.admin_key import resolve_admin_key
from rllm.producers.evaluation.progress import say
from rllm.producers.evaluation.runner import EvalConfig, Progress, run_tasks, write_results
from rllm.producers.evaluation.served import check_served, policy_line, served_policy
from rllm.producers.evaluation.summary import EvalSummary, summarize
from rllm.producers.harnesses import HarnessApi, HarnessRollout, get_harness, verifier_evaluator
from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.types import RolloutOutcome
from rllm.sandboxes import OWNER_LABEL, SandboxBackend, SandboxSettings, get_backend
from rllm.sandboxes.errors import DockerfileError
from rllm.sandboxes.images.dockerfile import parse_dockerfile
from rllm.sandboxes.images.plan import base_image
from rllm.sandboxes.images.resolve import substitution_for
from rllm.schemas.types import Task

__all__ = [
    "HARNESS_PREFIX",
    "HarborRun",
    "check_harness_benchmark",
    "harness_name",
    "is_tasks_dir",
    "load_harbor_dataset",
    "open_harbor_run",
    "run_harbor_eval",
    "substituted_images",
    "tasks_dir_of",
    "unloaded_tasks",
    "verifier_outcomes",
]

HARNESS_PREFIX = "harness:"
"""A benchmark's default agent ``harness:NAME`` names a harness, not a built-in agent."""


def is_tasks_dir(name: str) -> bool:
    """Whether ``name`` (``rllm-cli eval``'s argument) is a folder of Harbor tasks rather than
    a benchmark: an existing directory that is written as a path or names no benchmark."""
    if not Path(name).is_dir():
        return False
    if os.sep in name or name.startswith("."):
        return True
    try:
        get_benchmark(name)
    except UnknownBenchmarkError:
        return True
    return False


def tasks_dir_of(config: EvalConfig) -> Path | None:
    """The Harbor tasks directory ``config`` evaluates; None for a plain benchmark.

    Raises:
        ConfigError: ``--tasks-dir`` was given for a benchmark no harness runs.
    """
    if config.tasks_dir is None:
        return Path(config.benchmark) if is_tasks_dir(config.benchmark) else None
    check_harness_benchmark(config.benchmark, config.tasks_dir)
    return config.tasks_dir


def check_harness_benchmark(benchmark: str, tasks_dir: Path) -> BenchmarkSpec:
    """The entry of ``benchmark``, which must be run by a harness to take ``tasks_dir``.

    Raises:
        UnknownBenchmarkError: no such benchmark.
        ConfigError: no harness runs it (``--tasks-dir`` does not apply).
    """
    spec = get_benchmark(benchmark)
    if Need.HARNESS not in spec.needs:
        raise ConfigError(
            f"--tasks-dir {tasks_dir} applies to agentic benchmarks run by a harness "
            f"(terminal_bench2, swebench_verified, skillsbench, ...), not {spec.name!r}; "
            f"drop --tasks-dir, or give the folder alone (rllm-cli eval {tasks_dir}; "
            f"rllm-cli train --tasks-dir {tasks_dir} without --benchmark)"
        )
    return spec


def harness_name(agent: str | None, spec: BenchmarkSpec | None, where: Path) -> str:
    """The harness to run on the tasks in ``where``: ``agent`` (``harness:`` optional).

    Raises:
        ConfigError: no ``--agent`` was given (the harnesses are named).
        UnknownHarnessError: no harness has that name.
    """
    if agent is None:
        note = "" if spec is None else f"; {spec.name}'s own {spec.agent!r} is not shipped"
        raise ConfigError(
            f"Harbor tasks in {where} run under a harness: pass --agent NAME "
            f"(oracle, bash, react, ...; rllm-cli harness list shows them all){note}"
        )
    name = agent.removeprefix(HARNESS_PREFIX)
    get_harness(name)  # an unknown name fails here, before any sandbox
    return name


def load_harbor_dataset(
    tasks_dir: Path,
    *,
    name: str | None = None,
    agent_timeout_multiplier: float = 1.0,
    verifier_timeout_multiplier: float = 1.0,
) -> HarborDataset:
    """The task folders of ``tasks_dir`` with the timeout multipliers applied; folders that
    do not load are in ``errors``.

    Raises:
        ConfigError: a multiplier is not positive.
        HarborTaskError: ``tasks_dir`` is no directory, or holds no task folder.
    """
    for flag, value in (
        ("agent", agent_timeout_multiplier),
        ("verifier", verifier_timeout_multiplier),
    ):
        if not value > 0:
            raise ConfigError(f"--{flag}-timeout-multiplier must be > 0, got {value}")
    return load_dataset(
        tasks_dir,
        name=name,
        agent_timeout_multiplier=agent_timeout_multiplier,
        verifier_timeout_multiplier=verifier_timeout_multiplier,
    )


def unloaded_tasks(dataset: HarborDataset) -> list[tuple[str, str]]:
    """``(folder name, error)`` of every task folder of ``dataset`` that did not load."""
    loaded = {task.path for task in dataset.tasks}
    broken = [f.name for f in task_dirs(dataset.root) if f.resolve() not in loaded]
    return list(zip(broken, (str(e) for e in dataset.errors), strict=True))


@dataclass(frozen=True)
class HarborRun:
    """What a run on Harbor tasks needs: its rows, the harness as a rollout, the sandbox
    backend (the caller closes it), and the folders that did not load."""

    dataset: HarborDataset
    """Every task folder of the directory."""
    rows: list[Task]
    """The tasks to run (the first ``max_examples`` that loaded)."""
    rollout: HarnessRollout
    """The harness, run in sandboxes of ``backend``."""
    backend: SandboxBackend
    """Where the sandboxes come from."""
    unloaded: list[tuple[str, str]] = field(default_factory=list)
    """``(folder, error)`` of the folders that did not load."""


def open_harbor_run(
    tasks_dir: Path,
    agent: str | None,
    *,
    run_id: str,
    benchmark: str | None = None,
    sandbox_backend: str | None = None,
    agent_timeout_multiplier: float = 1.0,
    verifier_timeout_multiplier: float = 1.0,
    artifacts_dir: Path | None = None,
    max_examples: int | None = None,
    image_substitutes: Mapping[str, str] | None = None,
) -> HarborRun:
    """Load the tasks in ``tasks_dir`` (as ``benchmark``'s when given) and make harness
    ``agent`` their rollout on ``sandbox_backend``, every sandbox labelled with ``run_id``.

    Raises:
        ConfigError, UnknownHarnessError, HarborTaskError: nothing can run (named).
        SandboxUnavailableError: the backend cannot run here.
    """
    spec = None if benchmark is None else check_harness_benchmark(benchmark, tasks_dir)
    harness = harness_name(agent, spec, tasks_dir)
    dataset = load_harbor_dataset(
        tasks_dir,
        name=spec.name if spec is not None else None,
        agent_timeout_multiplier=agent_timeout_multiplier,
        verifier_timeout_multiplier=verifier_timeout_multiplier,
    )
    backend = get_backend(sandbox_backend, _sandbox_settings(image_substitutes))
    rollout = HarnessRollout(
        get_harness(harness),
        backend,
        artifacts_dir=artifacts_dir,
        labels={OWNER_LABEL: run_id},
    )
    rows = dataset.rows()[:max_examples]
    return HarborRun(dataset, rows, rollout, backend, unloaded_tasks(dataset))


async def run_harbor_eval(
    config: EvalConfig,
    tasks_dir: Path,
    progress: Progress | None = None,
    on_tasks: Callable[[int], None] | None = None,
) -> EvalSummary:
    """Run ``config.agent`` (a harness) on every task folder in ``tasks_dir``, each in a
    sandbox of ``config.sandbox_backend``, scored by its verifier; summarise the run with
    the policy version the gateway's upstream serves.

    Raises:
        ConfigError, UnknownHarnessError, HarborTaskError: before any sandbox starts (a
            harness that calls a model is refused when the upstream does not serve
            ``config.model``).
    """
    run = open_harbor_run(
        tasks_dir,
        config.agent,
        run_id=config.run_id,
        benchmark=None if config.tasks_dir is None else config.benchmark,
        sandbox_backend=config.sandbox_backend,
        agent_timeout_multiplier=config.agent_timeout_multiplier,
        verifier_timeout_multiplier=config.verifier_timeout_multiplier,
        artifacts_dir=config.artifacts_dir,
        max_examples=config.max_examples,
        image_substitutes=config.image_substitutes,
    )
    try:  # bad input first (above), then what the stack serves
        served = await served_policy(config.gateway_url, resolve_admin_key(config.admin_key))
        if run.rollout.harness.api is not HarnessApi.NONE:  # the oracle calls no model
            check_served(served, config.model, config.gateway_url)
            if progress is not None:  # which policy this eval measures, before any result
                say(policy_line(config.run_id, config.model, served, config.policy))
    except BaseException:
        await run.backend.aclose()
        raise
    if on_tasks is not None:
        on_tasks(len(run.rows) * config.attempts)
    gateway = GatewayClient(config.gateway_url, config.admin_key)
    started = time.perf_counter()
    try:
        results = await run_tasks(
            run.rows,
            run.rollout,
            gateway,
            run_id=config.run_id,
            model=config.model,
            attempts=config.attempts,
            concurrency=config.concurrency,
            evaluator=verifier_evaluator,
            progress=progress,
        )
    finally:
        await gateway.aclose()
        await run.backend.aclose()
    if config.output is not None:
        write_results(config.output, results)
    summary = summarize(
        config.run_id,
        run.dataset.name,
        config.model,
        results,
        config.attempts,
        time.perf_counter() - started,
        unloaded=run.unloaded,
    )
    used = substituted_images(
        [run.dataset.get(row.task_id) for row in run.rows],
        _sandbox_settings(config.image_substitutes).image_substitutes,
    )
    return replace(
        summary,
        policy_version=served.policy_version,
        policy_run=served.policy_run,
        substituted_images=used,
        verifications=verifier_outcomes(results),
    )


def verifier_outcomes(results: Sequence[tuple[RolloutOutcome, object]]) -> list[dict[str, Any]]:
    """Why each attempt whose verifier ran got less than full reward: its task, reward, the
    exit code of ``tests/test.sh``, the error (no reward read) and the tail of its output,
    read from the harness run's summary (``HarnessRun.summary``)."""
    outcomes = []
    for outcome, _ in results:
        output = outcome.output if isinstance(outcome.output, dict) else {}
        ran = output.get("verifier_exit_code") is not None or output.get("verifier_error")
        reward = output.get("reward")
        if not ran or (isinstance(reward, int | float) and reward >= 1.0):
            continue
        outcomes.append(
            {
                "task": outcome.task.task_id,
                "reward": reward,
                "exit_code": output.get("verifier_exit_code"),
                "error": output.get("verifier_error"),
                "output_tail": output.get("verifier_output_tail", ""),
            }
        )
    return outcomes


def _sandbox_settings(image_substitutes: Mapping[str, str] | None) -> SandboxSettings:
    """``SandboxSettings`` from the environment, ``image_substitutes`` added on top."""
    settings = SandboxSettings()
    if not image_substitutes:
        return settings
    merged = {**settings.image_substitutes, **image_substitutes}
    return settings.model_copy(update={"image_substitutes": merged})


def substituted_images(
    tasks: Sequence[HarborTask], substitutes: Mapping[str, str]
) -> dict[str, str]:
    """The tasks' images that a substitute stands in for, asked-for -> used: each task's
    Dockerfile ``FROM`` (default ARGs applied), or its ``docker_image``."""
    used = {}
    for task in tasks:
        image = _task_image(task)
        found = substitution_for(image, substitutes) if image else None
        if image and found:
            used[image] = found
    return used


def _task_image(task: HarborTask) -> str | None:
    if task.dockerfile is None:
        return task.config.docker_image
    try:
        instructions = parse_dockerfile(task.dockerfile.read_text(), str(task.dockerfile))
        return base_image(instructions, None)[0]
    except (DockerfileError, OSError, UnicodeDecodeError):
        return None  # the build names it
