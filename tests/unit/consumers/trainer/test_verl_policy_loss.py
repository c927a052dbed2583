"""Our clipped GRPO loss against verl's ``compute_policy_loss_vanilla`` (dual clip,
log-ratio clamp, ``pg_clipfrac`` and ``pg_clipfrac_lower``), per loss aggregation.

Values come from ``tests/fixtures/verl_advantages/generate.py`` (its header says how to
rerun it with verl).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from rllm.consumers.trainer.losses import LossInputs, compute_loss
from rllm.consumers.trainer.types import LossAgg, LossKind
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "verl_advantages" / "verl_advantages.json"
DOC: dict[str, Any] = json.loads(FIXTURE.read_text())
CASES: list[dict[str, Any]] = DOC["policy_loss_cases"]


def test_fixture_exercises_both_clips() -> None:
    assert DOC["verl_version"] == "0.9.1" and len(CASES) == 12
    assert any(c["verl"]["token-mean"]["clip_frac"] > 0 for c in CASES)
    assert any(c["verl"]["token-mean"]["clip_frac_lower"] > 0 for c in CASES)


@pytest.mark.parametrize("agg", list(LossAgg))
@pytest.mark.parametrize("case_no", range(len(CASES)))
def test_grpo_loss_equals_verl(agg: LossAgg, case_no: int) -> None:
    case = CASES[case_no]
    t = {
        k: torch.tensor(case[k], dtype=torch.float64)
        for k in ("logprobs", "old_logprobs", "advantages", "mask")
    }
    out = compute_loss(
        LossKind.GRPO,
        LossInputs(t["logprobs"], t["old_logprobs"], t["advantages"], t["mask"]),
        agg,
        case["clip_low"],
        case["clip_high"],
        clip_ratio_c=case["clip_ratio_c"],
    )
    want = case["verl"][agg.value]
    assert out.metrics["loss"] == pytest.approx(want["loss"], abs=1e-6, rel=0)
    assert out.metrics["clip_frac"] == pytest.approx(want["clip_frac"], abs=1e-6, rel=0)
    assert out.metrics["clip_frac_lower"] == pytest.approx(want["clip_frac_lower"], abs=1e-6, rel=0)
