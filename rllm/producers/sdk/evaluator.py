"""``@rllm.evaluator``: a scorer ``(task, outcome)`` whose verdict becomes a RewardAssigned."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

from rllm.benchmarks.rewards import get_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.producers.sdk.errors import EvaluatorResultError
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.envelope import envelope
from rllm.schemas.types import RewardAssigned, SessionEvent, Task

__all__ = ["Evaluator", "evaluator", "reward_fn_evaluator", "to_reward_result"]


def to_reward_result(value: Any) -> RewardResult:
    """Normalise what a scorer returned: float, bool, ``(reward, is_correct)``, dict or
    RewardResult.

    Raises:
        EvaluatorResultError: naming the value that is none of these.
    """
    if isinstance(value, RewardResult):
        return value
    if isinstance(value, bool):
        return RewardResult(reward=float(value), is_correct=value)
    if isinstance(value, (int, float)):
        return RewardResult(reward=float(value))
    if isinstance(value, tuple) and len(value) == 2:
        reward, correct = value
        return RewardResult(
            reward=float(reward), is_correct=None if correct is None else bool(correct)
        )
    if isinstance(value, dict) and "reward" in value:
        return RewardResult(
            reward=float(value["reward"]),
            is_correct=value.get("is_correct"),
            signals={str(k): float(v) for k, v in value.get("signals", {}).items()},
            metadata=dict(value.get("metadata", {})),
        )
    raise EvaluatorResultError(
        "an evaluator must return a float, a bool, (reward, is_correct), a dict with "
        f"'reward' or a RewardResult; got {value!r}"
    )


class Evaluator:
    """A scoring function bound to the event it publishes."""

    def __init__(self, fn: Callable[[Task, RolloutOutcome], Any], name: str | None = None):
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "evaluator"))
        functools.update_wrapper(self, fn)

    def __call__(self, task: Task, outcome: RolloutOutcome) -> Any:
        return self.fn(task, outcome)

    async def score(self, task: Task, outcome: RolloutOutcome) -> RewardResult:
        """Run the scorer (in a thread when it is synchronous) and normalise its result."""
        if inspect.iscoroutinefunction(self.fn):
            value = await self.fn(task, outcome)
        else:
            value = await asyncio.to_thread(self.fn, task, outcome)
        return to_reward_result(value)

    def event(self, outcome: RolloutOutcome, result: RewardResult) -> SessionEvent:
        """The RewardAssigned envelope for ``outcome``."""
        payload = RewardAssigned(
            reward=result.reward,
            is_correct=result.is_correct,
            signals=dict(result.signals),
            evaluator=self.name,
            metadata_json=json.dumps(result.metadata, default=str),
        )
        return envelope(outcome.session_id, outcome.run_id, "sdk", payload)


def evaluator(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Decorate a scorer ``(task, outcome)``; bare or with ``name=``."""
    if fn is None:
        return lambda f: Evaluator(f, name)
    return Evaluator(fn, name)


def reward_fn_evaluator(name: str) -> Evaluator:
    """An evaluator that applies the registered reward function ``name`` to the answer."""
    reward_fn = get_reward_fn(name)

    def score(task: Task, outcome: RolloutOutcome) -> RewardResult:
        if outcome.answer is None:
            return RewardResult(reward=0.0, is_correct=False, metadata={"error": "no answer"})
        return reward_fn(task, outcome.answer)

    return Evaluator(score, name)
