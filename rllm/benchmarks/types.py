"""Contracts of the benchmarks area: reward results and the reward-function protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rllm.schemas.types import Task

__all__ = ["RewardFn", "RewardResult"]


@dataclass(frozen=True)
class RewardResult:
    """What a reward function says about one answer."""

    reward: float
    """Scalar reward."""
    is_correct: bool | None = None
    """Whether the answer counts as correct (accuracy, pass@k); None when undefined."""
    signals: dict[str, float] = field(default_factory=dict)
    """Named reward components."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Details for humans (extracted answer, test output, ...); JSON-serialisable."""


class RewardFn(Protocol):
    """Scores an agent's final answer to a task; pure and thread-safe.

    May be slow (code execution, LLM judges): callers run it in a worker with a timeout.
    Raising is allowed; callers record the failure instead of crashing.
    """

    def __call__(self, task: Task, answer: str) -> RewardResult: ...
