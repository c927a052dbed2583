"""The comparison page: two runs, or two policy versions of one run, on the tasks both
were scored on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rllm.consumers.history import HistoryStore
from rllm.consumers.viewer import sql
from rllm.consumers.viewer.errors import NotFoundError
from rllm.consumers.viewer.reads import number, read

__all__ = ["CompareSide", "compare"]


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: a run, and one of its policy versions or all (-1)."""

    run: str
    """The run id."""
    version: int = -1
    """A policy version, or -1 for every version."""

    @property
    def label(self) -> str:
        """``run`` or ``run @ vN``."""
        return self.run if self.version < 0 else f"{self.run} @ v{self.version}"


def compare(store: HistoryStore, a: CompareSide, b: CompareSide) -> dict[str, Any]:
    """Two runs, or two policy versions, on the tasks both were scored on.

    Returns:
        ``tasks`` (common tasks: each side's sessions, mean reward, accuracy and the
        difference), ``only_a``/``only_b`` (tasks scored on one side only) and per side
        the mean over every scored session (``a_mean``/``b_mean``) and over the common
        tasks' sessions (``a_common``/``b_common``).

    Raises:
        NotFoundError: when a side has no rewarded session.
    """
    rows = read(
        store,
        sql.COMPARE,
        a_run=a.run,
        a_version=a.version,
        b_run=b.run,
        b_version=b.version,
        limit=100_000,
    )
    for side, name in ((a, "a"), (b, "b")):
        if not any(r[f"{name}_sessions"] for r in rows):
            raise NotFoundError(f"{side.label}: no rewarded session in the history")

    def mean(rs: list[dict[str, Any]], name: str) -> float | None:
        n = sum(r[f"{name}_sessions"] for r in rs)
        total = sum(
            r[f"{name}_reward"] * r[f"{name}_sessions"] for r in rs if r[f"{name}_sessions"]
        )
        return total / n if n else None

    common = [r for r in rows if r["a_sessions"] and r["b_sessions"]]
    for r in common:
        for name in ("a", "b"):
            r[f"{name}_accuracy"] = number(r[f"{name}_accuracy"])
        r["delta"] = r["b_reward"] - r["a_reward"]
    return {
        "tasks": common,
        "only_a": sum(1 for r in rows if r["a_sessions"] and not r["b_sessions"]),
        "only_b": sum(1 for r in rows if r["b_sessions"] and not r["a_sessions"]),
        "a_mean": mean(rows, "a"),
        "b_mean": mean(rows, "b"),
        "a_common": mean(common, "a"),
        "b_common": mean(common, "b"),
        "better": sum(1 for r in common if r["delta"] > 0),
        "worse": sum(1 for r in common if r["delta"] < 0),
    }
