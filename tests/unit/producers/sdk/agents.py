"""Agent functions the SDK tests share."""

from __future__ import annotations

import rllm
from rllm.producers.sdk import Rollout, RolloutConfig
from rllm.schemas.types import Task


def counting_agent(calls: list[str]) -> Rollout:
    """A rollout that answers "x" and appends each task id it runs on to ``calls``: a test
    of a refusal "before any rollout" asserts ``calls == []``."""

    @rllm.rollout
    def counted(task: Task, config: RolloutConfig) -> str:
        calls.append(task.task_id)
        return "x"

    return counted
