"""The distribution a token is sampled from, as logprobs: logits divided by the temperature,
then cut to the top-k tokens, then to the top-p nucleus, and renormalised (vLLM's order).

The local model server samples from it and reports these logprobs (vLLM's processed
logprobs); the trainer scores its tokens with the same function, so the importance ratio
compares the same distribution on both sides (verl scores with ``logits / temperature``).
"""

from __future__ import annotations

import torch

__all__ = ["REPRODUCIBLE", "sampled_logprobs", "truncation_mask"]

REPRODUCIBLE = ("temperature", "top_p", "top_k")
"""Request parameters that shape the sampling distribution and that ``sampled_logprobs``
reproduces; any other one with a non-neutral value (``min_p``, penalties, ``logit_bias``)
makes a step's logprobs impossible to recompute."""


def truncation_mask(
    logp_XV: torch.Tensor, top_p_X1: torch.Tensor | float, top_k_X1: torch.Tensor | int
) -> torch.Tensor:
    """The tokens that survive top-k then top-p, as a bool mask shaped like ``logp_XV``.

    Top-k keeps the ``k`` most likely tokens (``k`` ≤ 0: all). Top-p then keeps, in order of
    likelihood, each token whose more likely predecessors (renormalised over the top-k set)
    hold less than ``top_p`` of the mass: the smallest set holding at least ``top_p``, as
    vLLM cuts it; the most likely token always survives.
    """
    sorted_XV, idx_XV = torch.sort(logp_XV, dim=-1, descending=True)
    vocab = logp_XV.shape[-1]
    k_X1 = torch.as_tensor(top_k_X1, device=logp_XV.device)
    k_X1 = torch.where(k_X1 > 0, k_X1, vocab)
    rank_V = torch.arange(vocab, device=logp_XV.device)
    keep_XV = rank_V < k_X1
    probs_XV = torch.softmax(sorted_XV.masked_fill(~keep_XV, float("-inf")), dim=-1)
    before_XV = torch.cumsum(probs_XV, dim=-1) - probs_XV
    keep_XV = keep_XV & (before_XV < torch.as_tensor(top_p_X1, device=logp_XV.device))
    return torch.zeros_like(keep_XV).scatter(-1, idx_XV, keep_XV)


def sampled_logprobs(
    logits_XV: torch.Tensor,
    temperature_X1: torch.Tensor | float = 1.0,
    top_p_X1: torch.Tensor | float = 1.0,
    top_k_X1: torch.Tensor | int = 0,
) -> torch.Tensor:
    """Logprobs of the distribution sampled at ``temperature`` with ``top_k`` and ``top_p``
    (``-inf`` outside the cut). Rows at temperature 0 (greedy) get the raw distribution.

    The parameters broadcast against ``logits_XV[..., :1]`` (per row: shape ``[B, 1]`` for
    ``[B, V]``, ``[B, 1, 1]`` for ``[B, T, V]``). Differentiable in ``logits_XV``.
    """
    temp = torch.as_tensor(temperature_X1, dtype=torch.float32, device=logits_XV.device)
    greedy = temp <= 0
    logp_XV = torch.log_softmax(logits_XV.float() / torch.where(greedy, 1.0, temp), dim=-1)
    top_p = torch.where(greedy, 1.0, torch.as_tensor(top_p_X1, device=logits_XV.device))
    top_k = torch.where(greedy, 0, torch.as_tensor(top_k_X1, device=logits_XV.device))
    if bool((top_p >= 1.0).all()) and bool((top_k <= 0).all()):
        return logp_XV
    keep_XV = truncation_mask(logp_XV.detach(), top_p, top_k)
    cut_XV = logp_XV.masked_fill(~keep_XV, float("-inf"))
    return cut_XV - torch.logsumexp(cut_XV, dim=-1, keepdim=True)
