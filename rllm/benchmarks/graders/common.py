"""What the graders share: reading ground truths and pulling the final answer out of prose."""

from __future__ import annotations

import re
from typing import Any

from rllm.benchmarks.adapters import last_boxed
from rllm.benchmarks.errors import GradingError
from rllm.schemas.types import Task

__all__ = ["final_answer", "gold_list", "truth_of"]

_FINAL = re.compile(
    r"(?:final\s+answer|exact\s+answer|answer)\s*(?:is|:)\s*[:\-]?\s*(.+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def truth_of(task: Task) -> Any:
    """The parsed ground truth.

    Raises:
        GradingError: the task has none.
    """
    truth = task.ground_truth
    if truth is None:
        raise GradingError(f"task {task.task_id!r} has no ground truth to compare with")
    return truth


def gold_list(task: Task) -> list[str]:
    """The ground truth as a list of acceptable answer strings."""
    truth = truth_of(task)
    items = truth if isinstance(truth, list) else [truth]
    return [str(t) for t in items]


def final_answer(text: str) -> str:
    """The answer part of a reply: the last ``\\boxed{}``, else the last ``Answer: ...``,
    else the last non-empty line."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    found = _FINAL.findall(text)
    if found:
        return str(found[-1]).strip().strip("*").strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
