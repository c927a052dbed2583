"""bf16 arithmetic: the local backend trains a bf16 copy and keeps float32 master weights;
the model server can generate in bf16."""

from __future__ import annotations

from pathlib import Path

import torch

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.trainer.settings import Precision, TrainerSettings
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainSequence
from rllm.serving.engine import SamplingParams
from rllm.serving.server import build_engine
from rllm.serving.settings import ServeSettings

SEQS = [
    TrainSequence("e", "a", ("x",), [3, 4, 5, 6, 7, 8], [0, 0, 0, 1, 1, 1], [-1.0] * 6, 1.0),
    TrainSequence("e", "b", ("x",), [3, 4, 5, 9, 10], [0, 0, 0, 1, 1], [-1.0] * 5, -1.0),
]


def test_bf16_trains_a_copy_and_steps_float32_master_weights(tiny_model: Path) -> None:
    settings = TrainerSettings(model=str(tiny_model), loss=LossKind.GRPO, lr=1e-3)
    full = LocalBackend(settings)
    half = LocalBackend(settings.model_copy(update={"precision": Precision.BF16}))
    assert half.compute is not half.model
    assert {p.dtype for p in half.compute.parameters()} == {torch.bfloat16}
    before = {k: v.clone() for k, v in half.state_dict().items()}
    full.update(TrainBatch(list(SEQS), ["e"]))
    half.update(TrainBatch(list(SEQS), ["e"]))
    after = half.state_dict()
    assert {v.dtype for v in after.values()} == {torch.float32}
    moved = [k for k, v in after.items() if not torch.equal(v, before[k])]
    assert moved, "bf16 step changed no float32 weight"
    # AdamW's first step moves each weight by about lr * sign(grad): bf16 gradients give
    # (almost everywhere) the same signs, so the same update as float32
    agree = total = 0
    for k in moved:
        d_full = full.state_dict()[k] - before[k]
        d_half = after[k] - before[k]
        agree += int((torch.sign(d_full) == torch.sign(d_half)).sum())
        total += d_full.numel()
    assert agree / total > 0.9, f"only {agree}/{total} update signs agree"
    # the copy follows the master weights
    for master, low in zip(half.model.parameters(), half.compute.parameters(), strict=True):
        assert torch.equal(master.to(torch.bfloat16), low)
        assert low.grad is None and master.grad is not None


def test_bf16_checkpoint_reloads_into_the_copy(tiny_model: Path, tmp_path: Path) -> None:
    settings = TrainerSettings(model=str(tiny_model), lr=1e-3, precision=Precision.BF16)
    trained = LocalBackend(settings)
    trained.update(TrainBatch(list(SEQS), ["e"]))
    trained.save(tmp_path / "v1")
    other = LocalBackend(settings)
    other.load(tmp_path / "v1", 1)
    for a, b in zip(trained.compute.parameters(), other.compute.parameters(), strict=True):
        assert torch.equal(a, b)


def test_server_generates_in_bf16_with_close_logprobs(tiny_model: Path) -> None:
    full = build_engine(ServeSettings(model=str(tiny_model)))
    half = build_engine(ServeSettings(model=str(tiny_model), serve_dtype="bfloat16"))
    assert next(half.model.parameters()).dtype == torch.bfloat16
    greedy = SamplingParams(temperature=0.0, max_tokens=5)
    b = half.generate([[5, 6, 7]], [greedy])[0]
    assert len(b.token_ids) == 5
    # the float32 model's logprobs of the tokens the bf16 server chose
    with torch.no_grad():
        logits = full.model(torch.tensor([[5, 6, 7, *b.token_ids]])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    exact = [float(logp[2 + k, tok]) for k, tok in enumerate(b.token_ids)]
    assert max(abs(x - y) for x, y in zip(exact, b.logprobs, strict=True)) < 0.1
    assert b.logprobs != exact  # it did run in bf16
    # a float32 checkpoint loads into the bf16 server
    half.load_state_dict(full.model.state_dict(), version=3)
    assert half.version == 3 and next(half.model.parameters()).dtype == torch.bfloat16
