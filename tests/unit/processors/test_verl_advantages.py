"""Our estimators against values produced by verl's own ``core_algos`` functions.

The fixture comes from ``tests/fixtures/verl_advantages/generate.py`` (its header says
how to rerun it); it records the verl version it was produced with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rllm.consumers.trainer.whitening import whiten_over_tokens
from rllm.processors.advantages import compute_advantages
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "verl_advantages" / "verl_advantages.json"
DOC: dict[str, Any] = json.loads(FIXTURE.read_text())
CASES: list[dict[str, Any]] = DOC["cases"]

Estimate = Callable[[list[float]], np.ndarray]
OURS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": ("grpo", {"scale_by_std": True}),
    "grpo_no_std": ("grpo", {"scale_by_std": False}),
    "rloo": ("rloo", {}),
    "reinforce_plus_plus": ("reinforce_plus_plus", {}),
    "reinforce_plus_plus_baseline": ("reinforce_plus_plus_baseline", {}),
}
BATCH_WHITENED = {"reinforce_plus_plus", "reinforce_plus_plus_baseline"}


def ours(verl_name: str, case: dict[str, Any]) -> list[float]:
    """Our advantages of a fixture batch: per group, then the batch whitening if any."""
    estimator, kwargs = OURS[verl_name]
    index, rewards = case["index"], case["rewards"]
    out = [0.0] * len(rewards)
    for g in sorted(set(index)):
        members = [i for i, x in enumerate(index) if x == g]
        adv_G = compute_advantages(
            estimator, [rewards[i] for i in members], eps=DOC["epsilon"], **kwargs
        )
        for i, a in zip(members, adv_G, strict=True):
            out[i] = float(a)
    if verl_name in BATCH_WHITENED:
        return [float(x) for x in whiten_over_tokens(out, case["num_tokens"])]
    return out


def test_fixture_names_its_verl_version_and_covers_groups_of_one() -> None:
    assert DOC["verl_version"] == "0.9.1" and len(CASES) == 27
    sizes = [len([x for x in c["index"] if x == g]) for c in CASES for g in set(c["index"])]
    assert 1 in sizes and 16 in sizes


@pytest.mark.parametrize("verl_name", sorted(OURS))
@pytest.mark.parametrize("case_no", range(len(CASES)))
def test_equals_verl(verl_name: str, case_no: int) -> None:
    case = CASES[case_no]
    assert ours(verl_name, case) == pytest.approx(case["verl"][verl_name], abs=1e-6, rel=0)
