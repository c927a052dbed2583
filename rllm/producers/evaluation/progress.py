"""Progress lines on stderr for runs started from Python (``AgentTrainer.evaluate()`` and
``train()``): a line when the run starts, about every tenth of its attempts, and at the end,
so that a run of minutes is never silent."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from rllm.benchmarks.types import RewardResult
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionStatus

__all__ = ["ProgressLines", "say"]


def say(line: str, stream: TextIO | None = None) -> None:
    """Write one line to ``stream`` (default: the current ``sys.stderr``) and flush it."""
    out = sys.stderr if stream is None else stream
    out.write(line + "\n")
    out.flush()


class ProgressLines:
    """Counts finished attempts of a run; a ``Progress`` callback of ``run_tasks``.

    Args:
        label: what runs (``evaluate run-1-val``), the start of every line.
        total: attempts the run will make.
        lines: about how many lines between the first and the last (``total / lines``
            attempts each; every attempt when ``total`` is smaller).
        stream: where the lines go (default: the current ``sys.stderr``).
    """

    def __init__(self, label: str, total: int, lines: int = 10, stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.every = max(1, math.ceil(total / max(1, lines)))
        """Attempts between two lines."""
        self.stream = stream
        self.done = 0
        """Attempts finished."""
        self.correct = 0
        """Attempts scored correct."""
        self.errors = 0
        """Attempts whose agent failed or that got no reward."""
        self.started = time.perf_counter()

    def __call__(self, outcome: RolloutOutcome, reward: RewardResult | None) -> None:
        """Count one finished attempt; print a line every ``every`` attempts and at the end."""
        self.done += 1
        self.correct += bool(reward is not None and reward.is_correct)
        self.errors += outcome.status is not SessionStatus.OK or reward is None
        if self.done % self.every == 0 or self.done == self.total:
            say(self.line(), self.stream)

    def line(self) -> str:
        """``evaluate r-val: 40/81 attempts, 5 correct, 0 errors, 12.3 s``."""
        seconds = time.perf_counter() - self.started
        return (
            f"{self.label}: {self.done}/{self.total} attempts, {self.correct} correct, "
            f"{self.errors} error{'' if self.errors == 1 else 's'}, {seconds:.1f} s"
        )
