"""The rollouts of a training run: its tasks, their batches per epoch, and one batch's run
through the gateway with the agent and its scorer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from rllm.app.config import TrainConfig
from rllm.benchmarks.types import RewardResult
from rllm.errors import ConfigError
from rllm.producers.evaluation import run_tasks
from rllm.producers.evaluation.progress import ProgressLines
from rllm.producers.sdk import Evaluator, GatewayClient, Rollout, RolloutOutcome
from rllm.schemas.run import with_run_estimator
from rllm.schemas.types import Estimator, Task

__all__ = ["dataset_tasks", "epoch_batches", "run_rollouts"]


def dataset_tasks(dataset: Sequence[Task] | str | None, what: str) -> list[Task]:
    """The tasks of ``dataset``: tasks as given, a benchmark's by name, none for None.

    Raises:
        ConfigError: an item is not a Task (naming ``what`` and its index).
    """
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


def epoch_batches(
    tasks: list[Task], batch_size: int, epochs: int, estimator: Estimator | None = None
) -> Iterator[list[Task]]:
    """Batches of every epoch, each task carrying the run's ``estimator`` (so the
    processors compute the advantages the loss trains on). From the second epoch on a
    task's id gets ``@e<N>``: the processors group a run's rollouts by task id and the
    trainer keeps one episode per id, so a task seen again must be a new group, not a
    late or duplicate one."""
    base = tasks if estimator is None else [with_run_estimator(t, estimator) for t in tasks]
    for epoch in range(epochs):
        these = (
            base
            if epoch == 0
            else [t.model_copy(update={"task_id": f"{t.task_id}@e{epoch + 1}"}) for t in base]
        )
        for start in range(0, len(these), batch_size):
            yield these[start : start + batch_size]


async def run_rollouts(
    config: TrainConfig,
    rollout: Rollout,
    evaluator: Evaluator | None,
    tasks: list[Task],
    attempts: int,
    run_id: str,
    progress: ProgressLines | None = None,
) -> list[tuple[RolloutOutcome, RewardResult | None]]:
    """Roll out ``tasks`` ``attempts`` times each through ``config.gateway_url`` and score
    them; ``config.concurrency`` in flight (0: all at once)."""
    concurrency = config.concurrency or len(tasks) * attempts
    # A sync agent or evaluator runs in the loop's default executor, whose cpu + 4
    # threads (6 on 2 cores) would hold a batch of 32 rollouts to 6 calls at once
    # (the model server generating batches of 6) and queue the scoring behind the
    # last rollout: this loop is ours, so give it a thread per rollout and scorer.
    pool = ThreadPoolExecutor(max_workers=2 * concurrency, thread_name_prefix="rllm-agent")
    asyncio.get_running_loop().set_default_executor(pool)
    gateway = GatewayClient(config.gateway_url, config.admin_key)
    try:
        return await run_tasks(
            tasks,
            rollout,
            gateway,
            run_id=run_id,
            model=config.model,
            attempts=attempts,
            concurrency=concurrency,
            sampling=config.sampling,
            evaluator=evaluator,
            progress=progress,
        )
    finally:
        await gateway.aclose()
