"""Contracts of replay: the filter a dataset is selected with, and one SFT example."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReplayFilter", "SftExample"]


@dataclass(frozen=True)
class ReplayFilter:
    """Which steps become SFT examples."""

    min_reward: float | None = None
    """Keep sessions whose reward is at least this."""
    correct_only: bool = False
    """Keep sessions marked correct."""
    best_of_n: int | None = None
    """Keep the n best-rewarded sessions per (run, task)."""
    benchmark: str | None = None
    """Only this benchmark."""
    model: str | None = None
    """Only this model."""
    run: str | None = None
    """Only this run."""
    dedup: bool = True
    """Drop examples whose prompt and response token IDs were seen already."""


@dataclass(frozen=True)
class SftExample:
    """One training example: a step's full prompt and its sampled response."""

    session_id: str
    """Session the step belongs to."""
    run_id: str
    """Run."""
    task_id: str
    """Task."""
    benchmark: str
    """Benchmark."""
    model: str
    """Model that sampled the response."""
    step_index: int
    """Order within the session."""
    reward: float | None
    """Session reward."""
    is_correct: bool | None
    """Session correctness."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Chat messages: the request's, then the assistant's answer."""
    prompt_token_ids: list[int] = field(default_factory=list)
    """Full prompt token IDs (delta-encoded prompts restored)."""
    response_token_ids: list[int] = field(default_factory=list)
    """Sampled token IDs."""
