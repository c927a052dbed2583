"""Losses and aggregations against hand-computed references."""

from __future__ import annotations

import math

import pytest
import torch

from rllm.consumers.trainer.losses import LossInputs, aggregate, compute_loss, kl_k3
from rllm.consumers.trainer.types import LossAgg, LossKind

LOSS_BT = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
MASK_BT = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        (LossAgg.TOKEN_MEAN, (1 + 2 + 3 + 4) / 4),  # 2.5
        (LossAgg.SEQ_MEAN_TOKEN_MEAN, (6 / 3 + 4 / 1) / 2),  # 3.0
        (LossAgg.SEQ_MEAN_TOKEN_SUM, (6 + 4) / 2),  # 5.0
    ],
)
def test_aggregations(agg: LossAgg, expected: float) -> None:
    assert float(aggregate(LOSS_BT, MASK_BT, agg)) == pytest.approx(expected)


def test_masked_tokens_do_not_count() -> None:
    loss = LOSS_BT.clone()
    loss[1, 1:] = 1000.0  # masked positions: must not matter
    assert float(aggregate(loss, MASK_BT, LossAgg.TOKEN_MEAN)) == pytest.approx(2.5)
    # a sequence with no loss token is not averaged in
    mask = MASK_BT.clone()
    mask[1] = 0.0
    assert float(aggregate(LOSS_BT, mask, LossAgg.SEQ_MEAN_TOKEN_SUM)) == pytest.approx(6.0)


def _inputs(lp: list[float], old: list[float], adv: list[float]) -> LossInputs:
    return LossInputs(
        logprobs_BT=torch.tensor([lp], requires_grad=True),
        old_logprobs_BT=torch.tensor([old]),
        advantages_BT=torch.tensor([adv]),
        mask_BT=torch.ones(1, len(lp)),
    )


def test_grpo_clipped_surrogate_hand_computed() -> None:
    # token 0: ratio e^0.5=1.6487, A=+1 -> min(1.6487, 1.2) = 1.2
    # token 1: ratio e^-0.5=0.6065, A=-2 -> min(-1.2131, 0.8*-2=-1.6) = -1.6
    # token 2: ratio 1, A=0.5 -> 0.5
    inp = _inputs([-0.5, -1.5, -1.0], [-1.0, -1.0, -1.0], [1.0, -2.0, 0.5])
    out = compute_loss(LossKind.GRPO, inp, LossAgg.TOKEN_MEAN, 0.2, 0.2)
    assert out.loss.item() == pytest.approx(-(1.2 - 1.6 + 0.5) / 3, abs=1e-6)
    assert out.metrics["clip_frac"] == pytest.approx(2 / 3)
    out.loss.backward()
    grad = inp.logprobs_BT.grad
    assert grad is not None
    # clipped tokens get no gradient; token 2: d(-r*A/3)/dlp = -A*r/3 = -0.5/3
    assert grad[0].tolist() == pytest.approx([0.0, 0.0, -0.5 / 3], abs=1e-6)


def test_grpo_asymmetric_clip_range() -> None:
    inp = _inputs([-0.5], [-1.0], [1.0])  # ratio 1.6487
    out = compute_loss(LossKind.GRPO, inp, LossAgg.TOKEN_MEAN, 0.2, 0.28)
    assert out.loss.item() == pytest.approx(-1.28)


def test_reinforce_rloo_sft_distill() -> None:
    lp, old, adv = [-0.5, -2.0], [-0.7, -1.0], [2.0, 2.0]
    assert compute_loss(LossKind.REINFORCE, _inputs(lp, old, adv)).loss.item() == pytest.approx(
        -(2 * -0.5 + 2 * -2.0) / 2
    )
    assert compute_loss(LossKind.RLOO, _inputs(lp, old, [1.0, -1.0])).loss.item() == pytest.approx(
        -(-0.5 + 2.0) / 2
    )
    assert compute_loss(LossKind.SFT, _inputs(lp, old, adv)).loss.item() == pytest.approx(1.25)
    inp = _inputs(lp, old, adv)
    inp.teacher_logprobs_BT = torch.tensor([[-0.2, -3.0]])
    # advantages = teacher - old = [0.5, -2.0]; loss = -(0.5*-0.5 + -2*-2)/2
    out = compute_loss(LossKind.DISTILL, inp)
    assert out.loss.item() == pytest.approx(-(0.5 * -0.5 + -2.0 * -2.0) / 2)
    assert out.metrics["reverse_kl"] == pytest.approx(-(0.5 - 2.0) / 2)


def test_distill_without_teacher_is_refused() -> None:
    with pytest.raises(ValueError, match="teacher"):
        compute_loss(LossKind.DISTILL, _inputs([-1.0], [-1.0], [0.0]))


def test_kl_k3_and_penalty() -> None:
    lp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -2.0]])
    r = -0.5
    assert kl_k3(lp, ref)[0].tolist() == pytest.approx([math.exp(r) - r - 1, 0.0])
    inp = _inputs([-1.0, -2.0], [-1.0, -2.0], [0.0, 0.0])
    inp.ref_logprobs_BT = ref
    out = compute_loss(LossKind.GRPO, inp, kl_coef=0.1)
    assert out.loss.item() == pytest.approx(0.1 * (math.exp(r) - r - 1) / 2, abs=1e-7)
    assert out.metrics["kl"] == pytest.approx((math.exp(r) - r - 1) / 2)


def test_grpo_dual_clip_for_negative_advantages_as_verl() -> None:
    # ratio e^2 = 7.389 with A = -1: the PPO clip keeps -A * r = 7.389 (max of 7.389 and
    # 1.2); verl's dual clip caps it at -A * clip_ratio_c = 3. A = +1 with the same ratio is
    # clipped to -1.2 as before, and the dual clip does not touch positive advantages.
    inp = _inputs([1.0, 1.0], [-1.0, -1.0], [-1.0, 1.0])
    out = compute_loss(LossKind.GRPO, inp, LossAgg.TOKEN_MEAN, 0.2, 0.2)
    assert out.loss.item() == pytest.approx((3.0 - 1.2) / 2, abs=1e-6)
    assert out.metrics["clip_frac"] == pytest.approx(0.5)  # only the A > 0 token: loss2 > loss1
    assert out.metrics["clip_frac_lower"] == pytest.approx(0.5)  # the A < 0 token
    out.loss.backward()  # type: ignore[no-untyped-call]  # torch stubs leave it untyped
    grad = inp.logprobs_BT.grad
    assert grad is not None and grad[0].tolist() == pytest.approx([0.0, 0.0])  # both capped
    wider = compute_loss(LossKind.GRPO, _inputs([1.0], [-1.0], [-1.0]), clip_ratio_c=10.0)
    assert wider.loss.item() == pytest.approx(math.exp(2.0), abs=1e-5)
    with pytest.raises(ValueError, match=r"clip_ratio_c must be greater than 1 .*got 1.0"):
        compute_loss(LossKind.GRPO, _inputs([1.0], [-1.0], [-1.0]), clip_ratio_c=1.0)


def test_grpo_clip_frac_counts_only_active_clipping_as_verl() -> None:
    # ratio e^-0.5 = 0.6065 is below 1 - 0.2, but with A = +1 the unclipped term
    # -A * r = -0.6065 is the larger loss, so no clipping is active: verl reports 0, the old
    # out-of-range count said 1. The loss is the unclipped one.
    out = compute_loss(LossKind.GRPO, _inputs([-1.5], [-1.0], [1.0]))
    assert out.metrics["clip_frac"] == 0.0
    assert out.loss.item() == pytest.approx(-math.exp(-0.5), abs=1e-6)
    # two tokens out of range on opposite sides for A = +1: one clipped (r > 1.2), one not
    out = compute_loss(LossKind.GRPO, _inputs([-0.5, -1.5], [-1.0, -1.0], [1.0, 1.0]))
    assert out.metrics["clip_frac"] == pytest.approx(0.5)


def test_grpo_log_ratio_is_clamped_at_20_as_verl() -> None:
    # logp - old = 100: e^100 overflows fp32 to inf; verl clamps the log-ratio to
    # [-20, 20] first, so the ratio is e^20 and the loss stays finite
    out = compute_loss(LossKind.GRPO, _inputs([0.0], [-100.0], [-1.0]), clip_ratio_c=1e12)
    assert out.metrics["ratio_mean"] == pytest.approx(math.exp(20.0), rel=1e-5)
    assert out.loss.item() == pytest.approx(math.exp(20.0), rel=1e-5)
