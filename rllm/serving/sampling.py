"""Sampling parameters and next-token sampling for the local model server's engine.

Rows without a seed share the engine's generator and are drawn together in one batched
call per step; a seeded row keeps its own generator, so its tokens depend only on its seed.

A draw inverts each row's cumulative distribution at one uniform number. On a 49k-token
vocabulary that takes 0.7 ms for 32 rows where ``torch.multinomial`` takes 30 ms: it
draws an exponential number for every token of the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rllm.models.sampling import sampled_logprobs

__all__ = [
    "SamplingParams",
    "draw",
    "filter_top_p",
    "row_logprobs",
    "sample_one",
    "sample_rows",
]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of one request."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None
    top_logprobs: int = 0
    top_k: int = 0
    """Sample among the ``top_k`` most likely tokens only (0: all)."""


def filter_top_p(probs_BV: torch.Tensor, top_p_B1: torch.Tensor | float) -> torch.Tensor:
    """Zero the tail of each row beyond its nucleus ``top_p`` (rows need not sum to 1)."""
    sorted_p, idx = torch.sort(probs_BV, descending=True)
    drop = (torch.cumsum(sorted_p, -1) - sorted_p) > top_p_B1
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    return torch.zeros_like(probs_BV).scatter(-1, idx, sorted_p)


def draw(probs_BV: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One token per row of ``probs_BV`` (non-negative, not necessarily normalised), with
    chance proportional to its weight: the first token whose cumulative weight exceeds a
    uniform draw over the row's total, so a zero-weight token is never drawn."""
    cum_BV = probs_BV.double().cumsum(-1)
    u_B1 = torch.rand(probs_BV.shape[0], 1, generator=gen, dtype=torch.float64)
    picked_B1 = torch.searchsorted(cum_BV, u_B1 * cum_BV[:, -1:], right=True)
    return picked_B1.squeeze(1).clamp_(max=probs_BV.shape[1] - 1)


def row_logprobs(logp_BV: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """The distribution each row samples from, as logprobs (``rllm.models.sampling``):
    tempered, top-k and top-p cut, renormalised; the raw one for a greedy row. These are
    the logprobs the server reports (vLLM's processed logprobs) and the trainer recomputes."""
    temps_B1 = torch.tensor([[p.temperature] for p in params])
    top_p_B1 = torch.tensor([[p.top_p] for p in params])
    top_k_B1 = torch.tensor([[p.top_k] for p in params])
    return sampled_logprobs(logp_BV, temps_B1, top_p_B1, top_k_B1)


def sample_one(logp_V: torch.Tensor, p: SamplingParams, gen: torch.Generator) -> int:
    """One token from a row's sampling logprobs (``row_logprobs``): greedy at
    temperature 0, else drawn from them."""
    if p.temperature <= 0:
        return int(torch.argmax(logp_V))
    return int(draw(logp_V.exp().unsqueeze(0), gen))


def sample_rows(
    logp_BV: torch.Tensor,
    rows: list[int],
    params: list[SamplingParams],
    gens: list[torch.Generator],
    shared: torch.Generator,
) -> dict[int, int]:
    """The next token of each row in ``rows`` from its sampling logprobs
    (``row_logprobs``): greedy and seeded rows one by one, the others (which draw from
    ``shared``) in one batched draw."""
    out: dict[int, int] = {}
    batch = []
    for i in rows:
        if params[i].temperature > 0 and gens[i] is shared:
            batch.append(i)
        else:
            out[i] = sample_one(logp_BV[i], params[i], gens[i])
    if batch:
        drawn = draw(logp_BV[batch].exp(), shared).tolist()
        out.update(zip(batch, drawn, strict=True))
    return out
