"""Contracts of the benchmarks area: benchmark entries, reward results, the reward protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from rllm.schemas.types import Task

__all__ = ["BenchmarkSpec", "Category", "Need", "RewardFn", "RewardResult"]


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


class Category(StrEnum):
    """The kind of skill a benchmark measures."""

    MATH = "math"
    CODE = "code"
    MCQ = "mcq"
    QA = "qa"
    INSTRUCTION = "instruction"
    TRANSLATION = "translation"
    SEARCH = "search"
    VISION = "vision"
    AGENTIC = "agentic"


class Need(StrEnum):
    """What a benchmark needs beyond a chat model."""

    HARNESS = "harness"
    """An agent harness of its own (tools, environment loop)."""
    SANDBOX = "sandbox"
    """A container or sandbox to run the agent's actions or tests in."""
    VISION = "vision"
    """A model that reads images."""
    SEARCH = "search"
    """A search tool or a retrieval corpus."""
    JUDGE = "judge"
    """A judge model (``RLLM_JUDGE_*``) to grade free-form answers."""


class BenchmarkSpec(BaseModel):
    """One registry entry: where the rows come from and how a row becomes a Task.

    A row becomes template variables through ``fields`` (required) and ``optional``
    (None when absent); the ``adapter`` named here may then derive more variables (a
    lettered choice list, a test program); ``prompt`` is rendered with ``str.format``
    and the variable named by ``truth`` becomes the ground truth.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Canonical name (lower case, ``[a-z0-9_]``)."""
    title: str
    """Human name, as papers spell it."""
    category: Category
    """Skill measured."""
    description: str = ""
    """One line about the benchmark."""
    aliases: tuple[str, ...] = ()
    """Other names accepted on the command line."""
    hf_id: str | None = None
    """Hugging Face dataset id; None when rows come from a package or a harness."""
    config: str | None = None
    """Dataset config (subset) name."""
    split: str = "test"
    """Default split."""
    source: str = "hub"
    """``hub``; ``package:MODULE/PATH`` (a data file shipped in a Python package);
    ``harness`` (task folders run by a harness; rows only through ``data_file``)."""
    id_field: str | None = None
    """Column holding a stable row id; the row index when None."""
    fields: dict[str, str] = {}
    """Template variable -> column (dotted path into nested structs); all required."""
    optional: dict[str, str] = {}
    """Template variable -> column; None when the row lacks it."""
    adapter: str | None = None
    """Name of a row adapter (``rllm.benchmarks.adapters``) deriving more variables."""
    prompt: str = "{question}"
    """Instruction template over the variables."""
    truth: str = "answer"
    """Variable that becomes the ground truth."""
    metadata: tuple[str, ...] = ()
    """Variables copied into the task's metadata."""
    reward_fn: str = "exact_match"
    """Registered reward function."""
    agent: str = "chat"
    """Default agent: ``chat``, ``code``, ``vlm``, ``search``, or ``harness:NAME``."""
    needs: frozenset[Need] = frozenset()
    """What it needs beyond a chat model."""
    homepage: str = ""
    """Paper or project page."""
