"""Benchmarks: the registry of datasets, their loaders and reward functions."""

from __future__ import annotations

from rllm.benchmarks.rewards import get_reward_fn, register_reward_fn, reward_fn_names
from rllm.benchmarks.types import RewardFn, RewardResult

__all__ = ["RewardFn", "RewardResult", "get_reward_fn", "register_reward_fn", "reward_fn_names"]
