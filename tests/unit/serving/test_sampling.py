"""The engine's token draw: frequencies follow the weights, zero weights never come up."""

from __future__ import annotations

import torch

from rllm.serving.sampling import (
    SamplingParams,
    draw,
    filter_top_p,
    row_logprobs,
    sample_one,
    sample_rows,
)


def test_draw_frequencies_follow_unnormalised_weights() -> None:
    gen = torch.Generator().manual_seed(0)
    weights = torch.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]]).expand(200_000, 5)
    counts = torch.bincount(draw(weights, gen), minlength=5).tolist()
    assert counts[4] == 0
    for k, want in enumerate([0.1, 0.2, 0.3, 0.4]):
        assert abs(counts[k] / 200_000 - want) < 0.005, (k, counts)


def test_draw_never_picks_zero_weight_tokens_at_either_end() -> None:
    gen = torch.Generator().manual_seed(1)
    weights = torch.zeros(50_000, 8)
    weights[:, 3] = 1e-3  # the only token with weight, between zero-weight ones
    assert set(draw(weights, gen).tolist()) == {3}


def test_seeded_row_draws_the_same_alone_and_in_a_batch() -> None:
    logp_BV = torch.log_softmax(torch.randn(3, 40, generator=torch.Generator().manual_seed(2)), -1)
    shared = torch.Generator().manual_seed(5)
    params = [SamplingParams(temperature=1.0, top_p=0.8, seed=7)] * 3
    gens = [shared, torch.Generator().manual_seed(7), shared]
    sampled_BV = row_logprobs(logp_BV, params)
    picks = sample_rows(sampled_BV, [0, 1, 2], params, gens, shared)
    alone = sample_one(sampled_BV[1], params[1], torch.Generator().manual_seed(7))
    assert picks[1] == alone
    kept = filter_top_p(torch.softmax(logp_BV, -1), 0.8)
    assert all(kept[k, picks[k]] > 0 for k in range(3))  # nothing outside the nucleus
