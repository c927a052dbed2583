"""Importance ratios under temperature and top-p: the model server reports the logprobs
of the distribution it sampled from, each step records how it was sampled, and the trainer
scores the tokens with the same distribution, so captured and recomputed logprobs agree
(verl's ``logits / temperature``, plus the same top-k / top-p cut)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rllm.consumers.backends.local.backend import LOCAL_CAPABILITIES, LocalBackend
from rllm.consumers.backends.local.tensors import to_tensors
from rllm.consumers.trainer.batching import Batcher
from rllm.consumers.trainer.errors import UnreproducibleSamplingError
from rllm.consumers.trainer.masking import step_sampling, trajectory_sequences
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import StepSampling
from rllm.models.loading import load_model
from rllm.models.sampling import sampled_logprobs, truncation_mask
from rllm.models.tiny import tiny_model_dir
from rllm.schemas.types import StepCaptured, TrajectoryAssembled
from rllm.serving.engine import Engine, SamplingParams
from tests.unit.consumers.trainer.factory import episode, step, trajectory

PROMPTS = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]


@pytest.fixture(scope="module")
def peaked_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama whose output layer is scaled up: random init gives near-uniform
    logits, where temperature and top-p hardly change a logprob."""
    root = tmp_path_factory.mktemp("peaked")
    loaded = load_model(str(tiny_model_dir(root / "base")))
    with torch.no_grad():
        loaded.model.lm_head.weight.mul_(5.0)
    loaded.model.save_pretrained(root / "model")
    loaded.tokenizer.save_pretrained(root / "model")
    return root / "model"


def _step(
    prompt: list[int], response: list[int], logprobs: list[float], params: dict[str, float]
) -> StepCaptured:
    """A step as the gateway records it: the request's sampling parameters with it."""
    captured = step(f"s{len(prompt)}", prompt, response, logprobs=logprobs)
    return captured.model_copy(update={"sampling_params_json": json.dumps(params)})


def _trajectory(steps: list[StepCaptured]) -> TrajectoryAssembled:
    return trajectory("sess", steps, 1.0)


def _captured_and_recomputed(
    model_dir: Path, params: SamplingParams, request: dict[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(captured, recomputed by the trainer, raw temperature-1) logprobs of every sampled
    token of a few prompts."""
    engine = Engine(load_model(str(model_dir)))
    outs = engine.generate(PROMPTS, [params] * len(PROMPTS))
    backend = LocalBackend(TrainerSettings(model=str(model_dir), micro_batch_size=8))
    traj = _trajectory(
        [_step(p, o.token_ids, o.logprobs, request) for p, o in zip(PROMPTS, outs, strict=True)]
    )
    seqs = trajectory_sequences(traj, "e", 1.0, merge_steps=False)
    captured, recomputed, raw = [], [], []
    for s in seqs:
        t = to_tensors([s], 0)
        with torch.no_grad():
            lp = backend._logprobs(backend.compute, t)[0]
            plain = backend._logprobs(backend.compute, t, sampled=False)[0]
        at = t.mask_BT[0].bool()
        captured += t.old_logprobs_BT[0][at].tolist()
        recomputed += lp[at].tolist()
        raw += plain[at].tolist()
    return np.array(captured), np.array(recomputed), np.array(raw)


@pytest.mark.parametrize(
    ("params", "request_body"),
    [
        (SamplingParams(temperature=0.7, max_tokens=24, seed=3), {"temperature": 0.7}),
        (SamplingParams(top_p=0.8, max_tokens=24, seed=4), {"top_p": 0.8}),
        (
            SamplingParams(temperature=0.7, top_p=0.8, max_tokens=24, seed=5),
            {"temperature": 0.7, "top_p": 0.8, "max_tokens": 24},
        ),
    ],
    ids=["T0.7", "top_p0.8", "T0.7+top_p0.8"],
)
def test_captured_logprobs_equal_the_trainers_recompute(
    peaked_model: Path, params: SamplingParams, request_body: dict[str, float]
) -> None:
    captured, recomputed, raw = _captured_and_recomputed(peaked_model, params, request_body)
    assert len(captured) >= 40
    assert np.abs(captured - recomputed).max() <= 1e-3
    # the test can fail: the raw temperature-1 logprobs are far from what was sampled
    assert np.abs(captured - raw).mean() > 0.05


def test_the_server_draws_only_inside_the_nucleus_and_reports_its_renormalised_logprob(
    peaked_model: Path,
) -> None:
    engine = Engine(load_model(str(peaked_model)))
    p = SamplingParams(temperature=0.7, top_p=0.8, max_tokens=16, seed=1)
    (out,) = engine.generate([PROMPTS[0]], [p])
    ids = torch.tensor([PROMPTS[0] + out.token_ids])
    with torch.no_grad():
        logits_TV = engine.model(input_ids=ids).logits[0, len(PROMPTS[0]) - 1 : -1]
    want_TV = sampled_logprobs(logits_TV, 0.7, 0.8)
    keep_TV = truncation_mask(torch.log_softmax(logits_TV / 0.7, -1), 0.8, 0)
    toks = torch.tensor(out.token_ids)
    assert bool(keep_TV.gather(-1, toks[:, None]).all())
    got = torch.tensor(out.logprobs)
    assert torch.allclose(got, want_TV.gather(-1, toks[:, None]).squeeze(-1), atol=1e-4)


def test_truncation_keeps_top_k_then_the_nucleus() -> None:
    logp_V = torch.log(torch.tensor([0.5, 0.3, 0.1, 0.06, 0.04]))
    assert truncation_mask(logp_V, 0.7, 0).tolist() == [True, True, False, False, False]
    assert truncation_mask(logp_V, 0.85, 0).tolist() == [True, True, True, False, False]
    assert truncation_mask(logp_V, 1.0, 2).tolist() == [True, True, False, False, False]
    # top-p over the renormalised top-3: 0.5/0.9 then 0.3/0.9 reach 0.89 before the third
    assert truncation_mask(logp_V, 0.85, 3).tolist() == [True, True, False, False, False]
    cut = sampled_logprobs(logp_V, 1.0, 0.7).exp()
    assert cut.tolist() == pytest.approx([0.625, 0.375, 0.0, 0.0, 0.0])


def test_steps_record_and_parse_their_sampling_and_merge_only_when_alike() -> None:
    step = _step([1, 2], [3], [-0.1], {"temperature": 0.7, "top_p": 0.9, "top_k": 20})
    assert step_sampling(step, "s") == StepSampling(0.7, 0.9, 20)
    assert step_sampling(_step([1], [2], [-1.0], {}), "s") == StepSampling()
    assert step_sampling(_step([1], [2], [-1.0], {"temperature": 0}), "s") == StepSampling(0.0)
    first = _step([1, 2], [3], [-0.1], {"temperature": 0.7})
    second = _step([1, 2, 3, 4], [5], [-0.2], {"temperature": 1.0})
    seqs = trajectory_sequences(_trajectory([first, second]), "e", 1.0)
    assert [s.sampling.temperature for s in seqs] == [0.7, 1.0], "not merged across samplings"


@pytest.mark.parametrize(
    ("params", "scored", "named"),
    [
        ({"min_p": 0.05}, None, "min_p=0.05"),
        ({"repetition_penalty": 1.1}, None, "repetition_penalty=1.1"),
        ({"temperature": 0.7}, frozenset(), "temperature=0.7"),
        ({"top_p": 0.9}, frozenset({"temperature"}), "top_p=0.9"),
    ],
)
def test_a_step_the_backend_cannot_score_is_refused_naming_the_parameter(
    params: dict[str, float], scored: frozenset[str] | None, named: str
) -> None:
    with pytest.raises(UnreproducibleSamplingError, match=named):
        step_sampling(_step([1], [2], [-1.0], params), "sess", scored)


def test_the_batcher_refuses_and_counts_an_episode_the_backend_cannot_score() -> None:
    ep = episode("e", rewards=(1.0, 0.0))
    trajs = tuple(
        t.model_copy(
            update={
                "steps": tuple(
                    s.model_copy(update={"sampling_params_json": '{"temperature": 0.6}'})
                    for s in t.steps
                )
            }
        )
        for t in ep.trajectories
    )
    ep = ep.model_copy(update={"trajectories": trajs})
    remote = Batcher(TrainerSettings(batch_size=1), scored=frozenset())
    assert remote.add(ep, 0) is False
    assert remote.drops.unreproducible_sampling_episodes == 1
    assert "temperature=0.6" in remote.drops.messages[-1]
    assert remote.drops.as_metrics()["refused_unreproducible_sampling_episodes"] == 1.0
    local = Batcher(TrainerSettings(batch_size=1), scored=LOCAL_CAPABILITIES.sampling)
    assert local.add(ep, 0) is True
