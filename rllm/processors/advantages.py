"""Advantage estimators: pure functions from a group's rewards to its advantages.

Each estimator equals verl's (``verl.trainer.ppo.core_algos``, outcome rewards, ``gamma``
1) for the same settings, groups of one included; ``tests/fixtures/verl_advantages`` holds
values produced by verl's own functions. The two REINFORCE++ estimators whiten over the
response tokens of a whole training batch, so they have two parts: the group part here
(``compute_advantages``) and the batch part that the trainer applies to each batch
(``rllm.consumers.trainer.whitening``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rllm.errors import ConfigError
from rllm.schemas.types import Estimator

__all__ = [
    "compute_advantages",
    "grpo_advantages",
    "is_uniform",
    "reinforce_advantages",
    "reinforce_pp_baseline_advantages",
    "rloo_advantages",
]

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
    """GRPO as verl: ``(r - mean(r)) / (std(r) + eps)`` with the unbiased std (``torch.std``).

    Without scaling (Dr. GRPO, verl's ``norm_adv_by_std_in_grpo=False``) ``r - mean(r)``.
    A group of one has mean 0 and std 1, as in verl: its advantage is ``r / (1 + eps)``
    (``r`` without scaling).
    """
    arr = _rewards(rewards_G)
    if arr.size == 0:
        return arr
    if arr.size == 1:
        mean, std = 0.0, 1.0
    else:
        mean, std = float(arr.mean()), float(arr.std(ddof=1))
    centred_G: Floats = arr - mean
    if not scale_by_std:
        return centred_G
    scaled_G: Floats = centred_G / (std + eps)
    return scaled_G


def rloo_advantages(rewards_G: Sequence[float] | Floats) -> Floats:
    """RLOO as verl: each reward minus the mean of the others.

    verl leaves a group of one unchanged: its advantage is its reward.
    """
    arr = _rewards(rewards_G)
    n = arr.size
    if n <= 1:
        return arr.copy()
    advantages_G: Floats = arr * n / (n - 1) - arr.mean() * n / (n - 1)
    return advantages_G


def reinforce_advantages(rewards_G: Sequence[float] | Floats, baseline: float = 0.0) -> Floats:
    """REINFORCE: the raw reward minus an optional constant baseline (no verl equivalent)."""
    return _rewards(rewards_G) - baseline


def reinforce_pp_baseline_advantages(rewards_G: Sequence[float] | Floats) -> Floats:
    """The group part of REINFORCE++-baseline: reward minus the group mean (a group of
    one keeps its reward, as in verl); the trainer whitens it per batch."""
    arr = _rewards(rewards_G)
    if arr.size <= 1:
        return arr.copy()
    centred_G: Floats = arr - arr.mean()
    return centred_G


def compute_advantages(
    estimator: Estimator | str,
    rewards_G: Sequence[float] | Floats,
    *,
    eps: float = 1e-6,
    scale_by_std: bool = True,
    baseline: float = 0.0,
) -> Floats:
    """The group part of the named estimator.

    For the REINFORCE++ estimators these are the values before the batch's
    whitening: the reward (``reinforce_plus_plus``) or the reward minus the group mean
    (``reinforce_plus_plus_baseline``).

    Raises:
        ConfigError: for an estimator name that is not an ``Estimator``.
    """
    if estimator == Estimator.GRPO:
        return grpo_advantages(rewards_G, eps=eps, scale_by_std=scale_by_std)
    if estimator == Estimator.RLOO:
        return rloo_advantages(rewards_G)
    if estimator == Estimator.REINFORCE:
        return reinforce_advantages(rewards_G, baseline=baseline)
    if estimator == Estimator.REINFORCE_PLUS_PLUS:
        return _rewards(rewards_G)
    if estimator == Estimator.REINFORCE_PLUS_PLUS_BASELINE:
        return reinforce_pp_baseline_advantages(rewards_G)
    raise ConfigError(
        f"unknown advantage estimator {str(estimator)!r}; use one of {', '.join(Estimator)}"
    )
