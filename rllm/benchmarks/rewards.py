"""Reward functions registered by name; ``Task.reward_fn`` names one of them."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any

from rllm.benchmarks.errors import NameTakenError, UnknownRewardFnError
from rllm.benchmarks.graders.common import truth_of
from rllm.benchmarks.types import RewardFn, RewardResult
from rllm.schemas.types import Task

__all__ = [
    "exact_match",
    "get_reward_fn",
    "last_number",
    "register_reward_fn",
    "reward_fn_names",
]

_REGISTRY: dict[str, RewardFn] = {}


def register_reward_fn(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register a reward function under ``name`` (decorator)."""

    def decorate(fn: RewardFn) -> RewardFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise NameTakenError(f"reward function {name!r} is already registered")
        _REGISTRY[name] = fn
        return fn

    return decorate


def get_reward_fn(name: str) -> RewardFn:
    """The reward function registered as ``name``.

    Raises:
        UnknownRewardFnError: naming the unknown function and the closest registered names.
    """
    _load_builtin()
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownRewardFnError(
            f"unknown reward function {name!r}{hint} (registered: {', '.join(sorted(_REGISTRY))})"
        )
    return _REGISTRY[name]


def reward_fn_names() -> list[str]:
    """Every registered reward function name, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    """Import the modules that register the built-in reward functions."""
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


# Modules whose import registers more reward functions (math, mcq, code, ...).
_BUILTIN_MODULES: list[str] = [
    f"rllm.benchmarks.graders.{name}"
    for name in ("maths", "choice", "qa", "coding", "chrf", "judge", "vision", "ifeval")
]


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").strip()).lower()


def _truths(task: Task) -> list[str]:
    truth: Any = truth_of(task)
    items = truth if isinstance(truth, list) else [truth]
    return [t if isinstance(t, str) else json.dumps(t) for t in items]


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@register_reward_fn("last_number")
def last_number(task: Task, answer: str) -> RewardResult:
    """1.0 when the last number in the answer equals the ground truth number."""
    found = _NUMBER.findall(answer.replace(",", ""))
    truths = _truths(task)
    ok = bool(found) and any(float(found[-1]) == float(t.strip('"')) for t in truths)
    return RewardResult(
        reward=1.0 if ok else 0.0,
        is_correct=ok,
        metadata={"last_number": found[-1] if found else None},
    )


@register_reward_fn("exact_match")
def exact_match(task: Task, answer: str) -> RewardResult:
    """1.0 when the answer equals a ground truth after trimming, case and space folding."""
    got = _normalise(answer)
    ok = any(got == _normalise(t) for t in _truths(task))
    return RewardResult(reward=1.0 if ok else 0.0, is_correct=ok, metadata={"answer": answer[:200]})
