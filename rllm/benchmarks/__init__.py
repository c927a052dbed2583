"""Benchmarks: the registry of datasets, their loaders and reward functions."""

from __future__ import annotations

from rllm.benchmarks.errors import (
    BenchmarkError,
    CodeSandboxError,
    DatasetRowError,
    DatasetUnavailableError,
    GradingError,
    NameTakenError,
    UnknownBenchmarkError,
    UnknownRewardFnError,
)
from rllm.benchmarks.loaders import BenchmarkSettings, load_tasks, pull, read_rows
from rllm.benchmarks.registry import all_benchmarks, benchmark_names, get_benchmark
from rllm.benchmarks.rewards import get_reward_fn, register_reward_fn, reward_fn_names
from rllm.benchmarks.types import BenchmarkSpec, Category, Need, RewardFn, RewardResult

__all__ = [
    "BenchmarkError",
    "BenchmarkSettings",
    "BenchmarkSpec",
    "Category",
    "CodeSandboxError",
    "DatasetRowError",
    "DatasetUnavailableError",
    "GradingError",
    "NameTakenError",
    "Need",
    "RewardFn",
    "RewardResult",
    "UnknownBenchmarkError",
    "UnknownRewardFnError",
    "all_benchmarks",
    "benchmark_names",
    "get_benchmark",
    "get_reward_fn",
    "load_tasks",
    "pull",
    "read_rows",
    "register_reward_fn",
    "reward_fn_names",
]
