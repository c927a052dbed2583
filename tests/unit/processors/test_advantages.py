"""Advantage estimators against hand-computed values."""

from __future__ import annotations

import math

import pytest

from rllm.errors import ConfigError
from rllm.processors.advantages import (
    compute_advantages,
    grpo_advantages,
    is_uniform,
    reinforce_advantages,
    rloo_advantages,
)


def test_grpo_one_right_of_four() -> None:
    # mean 0.25; unbiased std (torch.std, as verl) sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    advantages_G = grpo_advantages([1.0, 0.0, 0.0, 0.0], eps=0.0)
    assert advantages_G.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])


def test_grpo_eps_and_without_std_scaling() -> None:
    # [1, 0]: unbiased std sqrt(0.5); population std would give 0.5 / 1.5
    std = math.sqrt(0.5)
    assert grpo_advantages([1.0, 0.0], eps=1.0).tolist() == pytest.approx(
        [0.5 / (std + 1.0), -0.5 / (std + 1.0)]
    )
    assert grpo_advantages([1.0, 0.0, 0.0, 0.0], scale_by_std=False).tolist() == [
        0.75,
        -0.25,
        -0.25,
        -0.25,
    ]


def test_group_of_one_as_verl() -> None:
    # verl: mean 0 and std 1 for a single-sample group (GRPO), the reward unchanged (RLOO)
    assert grpo_advantages([0.7], eps=1e-6).tolist() == pytest.approx([0.7 / (1 + 1e-6)])
    assert grpo_advantages([0.7], scale_by_std=False).tolist() == [0.7]
    assert rloo_advantages([0.7]).tolist() == [0.7]
    assert compute_advantages("reinforce_plus_plus_baseline", [0.7]).tolist() == [0.7]


def test_grpo_uniform_group_is_zero_and_flagged() -> None:
    assert grpo_advantages([0.5, 0.5, 0.5]).tolist() == [0.0, 0.0, 0.0]
    assert is_uniform([0.5, 0.5, 0.5]) and not is_uniform([0.5, 0.25])


def test_rloo_leave_one_out() -> None:
    assert rloo_advantages([1.0, 2.0, 3.0]).tolist() == [-1.5, 0.0, 1.5]
    assert rloo_advantages([1.0, 0.0, 0.0, 0.0]).tolist() == pytest.approx(
        [1.0, -1 / 3, -1 / 3, -1 / 3]
    )


def test_reinforce_raw_and_baseline() -> None:
    assert reinforce_advantages([1.0, 0.0]).tolist() == [1.0, 0.0]
    assert reinforce_advantages([1.0, 0.0], baseline=0.5).tolist() == [0.5, -0.5]


def test_dispatch_and_bad_input() -> None:
    assert compute_advantages("rloo", [1.0, 3.0]).tolist() == [-2.0, 2.0]
    assert compute_advantages("reinforce_plus_plus", [1.0, 3.0]).tolist() == [1.0, 3.0]
    assert compute_advantages("reinforce_plus_plus_baseline", [1.0, 3.0]).tolist() == [-1.0, 1.0]
    with pytest.raises(ConfigError, match="'ppo'"):
        compute_advantages("ppo", [1.0])
    with pytest.raises(ValueError, match="finite"):
        grpo_advantages([1.0, float("nan")])
    with pytest.raises(ValueError, match="one-dimensional"):
        grpo_advantages([[1.0], [0.0]])  # type: ignore[list-item]  # a wrong shape on purpose
