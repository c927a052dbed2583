"""Run-level choices that travel with a run's events: the advantage estimator the user
chose rides in each task's metadata, so one processors deployment serves runs with
different estimators and the trainer can check what it trains on.
"""

from __future__ import annotations

import json

from rllm.errors import ConfigError
from rllm.schemas.types import Estimator, Task

__all__ = ["RUN_ESTIMATOR_KEY", "run_estimator", "with_run_estimator"]

RUN_ESTIMATOR_KEY = "rllm.estimator"
"""Key in ``Task.metadata_json`` naming the run's advantage estimator (e.g. ``rloo``)."""


def run_estimator(metadata_json: str) -> str | None:
    """The estimator a task's metadata names, or None when it names none.

    Raises:
        ConfigError: if the value is not a non-empty string.
    """
    try:
        metadata = json.loads(metadata_json or "{}")
    except json.JSONDecodeError:
        return None
    value = metadata.get(RUN_ESTIMATOR_KEY) if isinstance(metadata, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"task metadata {RUN_ESTIMATOR_KEY!r} must name an estimator, got {value!r}"
        )
    return value


def with_run_estimator(task: Task, estimator: Estimator) -> Task:
    """The task with the run's estimator recorded in its metadata."""
    metadata = {**task.metadata, RUN_ESTIMATOR_KEY: estimator}
    return task.model_copy(update={"metadata_json": json.dumps(metadata, sort_keys=True)})
