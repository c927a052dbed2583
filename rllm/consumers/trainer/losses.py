"""Pure torch losses: GRPO clipped surrogate, REINFORCE / RLOO policy gradient, SFT
cross-entropy and on-policy distillation, with the three loss aggregations and an optional
k3 KL penalty to a reference policy. All tensors are ``[B, T]``; ``mask_BT`` marks the
tokens that carry loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rllm.consumers.trainer.types import LossAgg, LossKind
from rllm.models.sampling import sampled_logprobs

__all__ = [
    "LOGPROB_FLOOR",
    "LossInputs",
    "LossOutput",
    "aggregate",
    "compute_loss",
    "kl_k3",
    "token_logprobs",
]


@dataclass
class LossInputs:
    """Per-token tensors of one micro-batch, all ``[B, T]`` and aligned to the targets."""

    logprobs_BT: torch.Tensor
    """Current policy's logprob of each target token (with grad)."""
    old_logprobs_BT: torch.Tensor
    """Rollout logprob of each target token, as captured."""
    advantages_BT: torch.Tensor
    """Advantage of each target token."""
    mask_BT: torch.Tensor
    """1.0 where the token carries loss."""
    ref_logprobs_BT: torch.Tensor | None = None
    """Reference policy's logprobs, for the KL penalty."""
    teacher_logprobs_BT: torch.Tensor | None = None
    """Teacher logprobs, for distillation."""


@dataclass
class LossOutput:
    """The loss and what to report about it."""

    loss: torch.Tensor
    metrics: dict[str, float]


LOGPROB_FLOOR = -9999.0
"""Lowest logprob a target gets: one outside the sampling cut (a near tie decided the other
way than at sampling time) scores this instead of -inf, which would make the loss NaN."""


def token_logprobs(
    logits_BTV: torch.Tensor,
    targets_BT: torch.Tensor,
    temperature_B: torch.Tensor | None = None,
    top_p_B: torch.Tensor | None = None,
    top_k_B: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logprob of each target under the logits (``log_softmax`` then gather); with the
    rows' sampling parameters, under the distribution they were sampled from (logits over
    the temperature, top-k then top-p cut, renormalised: ``rllm.models.sampling``)."""
    if temperature_B is None:
        logp = torch.log_softmax(logits_BTV.float(), dim=-1)
    else:
        per_row = (-1, 1, 1)
        logp = sampled_logprobs(
            logits_BTV,
            temperature_B.reshape(per_row),
            1.0 if top_p_B is None else top_p_B.reshape(per_row),
            0 if top_k_B is None else top_k_B.reshape(per_row),
        )
    picked_BT = logp.gather(-1, targets_BT.unsqueeze(-1)).squeeze(-1)
    return picked_BT.clamp(min=LOGPROB_FLOOR)


def aggregate(loss_BT: torch.Tensor, mask_BT: torch.Tensor, agg: LossAgg) -> torch.Tensor:
    """Reduce per-token losses to one number.

    token-mean: sum over all loss tokens / their count. seq-mean-token-mean: each
    sequence's token mean, averaged over sequences that have loss tokens.
    seq-mean-token-sum: each sequence's token sum, averaged over those sequences.
    """
    masked = loss_BT * mask_BT
    if agg is LossAgg.TOKEN_MEAN:
        return masked.sum() / mask_BT.sum().clamp(min=1.0)
    tokens_B = mask_BT.sum(-1)
    has_B = (tokens_B > 0).float()
    n_seq = has_B.sum().clamp(min=1.0)
    if agg is LossAgg.SEQ_MEAN_TOKEN_MEAN:
        return (masked.sum(-1) / tokens_B.clamp(min=1.0) * has_B).sum() / n_seq
    if agg is LossAgg.SEQ_MEAN_TOKEN_SUM:
        return (masked.sum(-1) * has_B).sum() / n_seq
    raise ValueError(f"unknown loss aggregation {agg!r}")


def kl_k3(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || reference): ``exp(r) - r - 1``, r = ref - pi."""
    r = ref_logprobs_BT - logprobs_BT
    return torch.exp(r) - r - 1.0


_LOG_RATIO_CLAMP = 20.0
"""verl clamps ``logp - old`` to ``[-20, 20]`` before the exponential."""


def _masked_mean(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> float:
    return float((x_BT * mask_BT).sum() / mask_BT.sum().clamp(min=1.0))


def compute_loss(
    kind: LossKind,
    inp: LossInputs,
    agg: LossAgg = LossAgg.TOKEN_MEAN,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    kl_coef: float = 0.0,
    clip_ratio_c: float = 3.0,
) -> LossOutput:
    """The loss of one micro-batch under objective ``kind``.

    GRPO, as verl's ``compute_policy_loss_vanilla``: ``-min(r A, clip(r, 1-eps_low,
    1+eps_high) A)`` with ``r = exp(clamp(logp - old, -20, 20))``, and for negative
    advantages dual-clip at ``-clip_ratio_c * A`` from above. ``clip_frac`` counts the
    tokens where the clipped term is the active one, ``clip_frac_lower`` those where the
    dual clip is.
    REINFORCE / RLOO: ``-A logp`` (A = reward or the processors' advantage). SFT:
    ``-logp``. DISTILL: ``-(teacher - old) logp``, the teacher-minus-student logprob of
    each sampled token as its advantage. Adds ``kl_coef * k3(pi, ref)`` per token when
    ``kl_coef > 0``.
    """
    lp, mask = inp.logprobs_BT, inp.mask_BT
    metrics: dict[str, float] = {}
    if kind is LossKind.GRPO:
        if clip_ratio_c <= 1.0:
            raise ValueError(
                f"clip_ratio_c must be greater than 1 (dual-clip lower bound), got {clip_ratio_c}"
            )
        adv = inp.advantages_BT
        ratio = torch.exp(
            torch.clamp(lp - inp.old_logprobs_BT, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
        )
        loss1 = -adv * ratio
        loss2 = -adv * torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
        clip1 = torch.maximum(loss1, loss2)
        loss3 = -adv * clip_ratio_c
        negative = adv < 0
        per_tok = torch.where(negative, torch.minimum(loss3, clip1), clip1)
        with torch.no_grad():
            metrics["clip_frac"] = _masked_mean((loss2 > loss1).float(), mask)
            metrics["clip_frac_lower"] = _masked_mean(((clip1 > loss3) & negative).float(), mask)
            metrics["ratio_mean"] = _masked_mean(ratio, mask)
    elif kind in (LossKind.REINFORCE, LossKind.RLOO):
        per_tok = -inp.advantages_BT * lp
    elif kind is LossKind.SFT:
        per_tok = -lp
    elif kind is LossKind.DISTILL:
        if inp.teacher_logprobs_BT is None:
            raise ValueError("loss=distill needs teacher logprobs (set teacher_model)")
        adv = (inp.teacher_logprobs_BT - inp.old_logprobs_BT).detach()
        per_tok = -adv * lp
        metrics["reverse_kl"] = -_masked_mean(adv, mask)
    else:
        raise ValueError(f"unknown loss {kind!r}")
    if kl_coef > 0:
        if inp.ref_logprobs_BT is None:
            raise ValueError("kl_coef > 0 needs reference logprobs")
        kl = kl_k3(lp, inp.ref_logprobs_BT)
        per_tok = per_tok + kl_coef * kl
        metrics["kl"] = _masked_mean(kl.detach(), mask)
    loss = aggregate(per_tok, mask, agg)
    metrics["loss"] = float(loss.detach())
    return LossOutput(loss=loss, metrics=metrics)
