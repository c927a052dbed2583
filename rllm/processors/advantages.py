"""Advantage estimators: pure functions from a group's rewards to its advantages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rllm.errors import ConfigError

__all__ = [
    "ESTIMATORS",
    "compute_advantages",
    "grpo_advantages",
    "is_uniform",
    "reinforce_advantages",
    "rloo_advantages",
]

ESTIMATORS = ("grpo", "rloo", "reinforce")
"""Names accepted by ``compute_advantages``."""

Floats = npt.NDArray[np.float64]


def _rewards(rewards_G: Sequence[float] | Floats) -> Floats:
    arr = np.asarray(rewards_G, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"rewards_G must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"rewards_G must be finite, got {arr.tolist()}")
    return arr


def is_uniform(rewards_G: Sequence[float] | Floats) -> bool:
    """True when every reward in the group is equal (no learning signal for GRPO)."""
    arr = _rewards(rewards_G)
    return bool(arr.size == 0 or np.all(arr == arr[0]))


def grpo_advantages(
    rewards_G: Sequence[float] | Floats, eps: float = 1e-6, scale_by_std: bool = True
) -> Floats:
    """GRPO: ``(r - mean(r)) / (std(r) + eps)``, population std; without scaling ``r - mean``."""
    arr = _rewards(rewards_G)
    if arr.size == 0:
        return arr
    centred_G: Floats = arr - arr.mean()
    if not scale_by_std:
        return centred_G
    scaled_G: Floats = centred_G / (arr.std() + eps)
    return scaled_G


def rloo_advantages(rewards_G: Sequence[float] | Floats) -> Floats:
    """RLOO: each reward minus the mean of the others; a group of one gets 0."""
    arr = _rewards(rewards_G)
    n = arr.size
    if n <= 1:
        return np.zeros_like(arr)
    advantages_G: Floats = arr - (arr.sum() - arr) / (n - 1)
    return advantages_G


def reinforce_advantages(rewards_G: Sequence[float] | Floats, baseline: float = 0.0) -> Floats:
    """REINFORCE: the raw reward minus an optional constant baseline."""
    return _rewards(rewards_G) - baseline


def compute_advantages(
    estimator: str,
    rewards_G: Sequence[float] | Floats,
    *,
    eps: float = 1e-6,
    scale_by_std: bool = True,
    baseline: float = 0.0,
) -> Floats:
    """Dispatch to the named estimator.

    Raises:
        ConfigError: for an estimator name that is not one of ``ESTIMATORS``.
    """
    if estimator == "grpo":
        return grpo_advantages(rewards_G, eps=eps, scale_by_std=scale_by_std)
    if estimator == "rloo":
        return rloo_advantages(rewards_G)
    if estimator == "reinforce":
        return reinforce_advantages(rewards_G, baseline=baseline)
    raise ConfigError(
        f"unknown advantage estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")
