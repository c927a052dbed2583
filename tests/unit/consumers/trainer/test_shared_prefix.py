"""A group's shared prompt runs once in training: same logprobs and the same gradient as
running every sequence in full."""

from __future__ import annotations

from pathlib import Path

import torch

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.backends.local.tensors import group_by_prefix, shared_prefix, to_tensors
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainSequence


def _seq(ids: list[int], mask: list[int], name: str = "s", adv: float = 1.0) -> TrainSequence:
    lps = [-0.5 if m else 0.0 for m in mask]
    return TrainSequence("e", name, ("x",), ids, mask, lps, advantage=adv)


PROMPT = [3, 4, 5, 6, 7, 8]
GROUP = [
    _seq([*PROMPT, 9, 10, 11], [0] * 6 + [1, 1, 1], "a", 1.0),
    _seq([*PROMPT, 12], [0] * 6 + [1], "b", -0.5),
    # a second turn: tool output (masked) between two sampled spans
    _seq([*PROMPT, 13, 14, 20, 21, 15], [0] * 6 + [1, 1, 0, 0, 1], "c", 0.25),
]


def test_shared_prefix_stops_before_the_first_predicted_loss_token() -> None:
    # the token at index 6 is the first trained one; position 5 predicts it
    assert shared_prefix(GROUP) == 5
    assert shared_prefix(GROUP[:1]) == 0
    other = _seq([3, 4, 99, 6, 7, 8, 9], [0] * 6 + [1])
    assert shared_prefix([GROUP[0], other]) == 2
    early = _seq([3, 4, 5, 6, 7, 8, 9], [0, 0, 1, 1, 1, 1, 1])
    assert shared_prefix([GROUP[0], early]) == 1


def test_micro_batches_keep_a_prompt_together_in_first_seen_order() -> None:
    other = _seq([30, 31, 32, 33], [0, 0, 1, 1], "o")
    mixed = [GROUP[0], other, GROUP[1], GROUP[2]]
    chunks = group_by_prefix(mixed, 2)
    assert [[s.session_id for s in c] for c in chunks] == [["a", "b"], ["c"], ["o"]]


def test_prefix_tensors_are_the_full_tensors_shifted() -> None:
    full = to_tensors(GROUP, 0)
    cut = to_tensors(GROUP, 0, prefix=5)
    assert cut.prefix_ids_1P is not None and cut.prefix_ids_1P.tolist() == [PROMPT[:5]]
    assert torch.equal(cut.targets_BT, full.targets_BT[:, 5:])
    assert torch.equal(cut.mask_BT, full.mask_BT[:, 5:])
    assert torch.equal(cut.old_logprobs_BT, full.old_logprobs_BT[:, 5:])
    assert full.mask_BT[:, :5].sum() == 0


def test_shared_prefix_gives_the_same_logprobs_and_gradient(tiny_model: Path) -> None:
    backend = LocalBackend(TrainerSettings(model=str(tiny_model), loss=LossKind.SFT))
    model = backend.model
    grads = []
    logprobs = []
    for prefix in (0, shared_prefix(GROUP)):
        model.zero_grad()
        t = to_tensors(GROUP, 0, prefix=prefix)
        lp = backend._logprobs(model, t)
        (lp * t.mask_BT * torch.tensor([[1.0], [2.0], [3.0]])).sum().backward()
        logprobs.append((lp * t.mask_BT)[t.mask_BT.bool()])
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert torch.allclose(logprobs[0], logprobs[1], atol=1e-5)
    assert len(logprobs[0]) == 3 + 1 + 3
    assert set(grads[0]) == set(grads[1])
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-5, rtol=1e-4), name


def test_update_with_groups_matches_one_sequence_at_a_time(tiny_model: Path) -> None:
    """Micro-batch 1 runs every sequence alone and in full; a micro-batch of 3 shares the
    prompt. One SGD-like step (AdamW's first step is the sign of the gradient, so compare
    the gradients themselves)."""
    grads = []
    for mbs in (1, 3):
        backend = LocalBackend(
            TrainerSettings(model=str(tiny_model), loss=LossKind.GRPO, micro_batch_size=mbs)
        )
        backend.update(TrainBatch(list(GROUP), ["e"]))
        grads.append(
            {n: p.grad.clone() for n, p in backend.model.named_parameters() if p.grad is not None}
        )
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-5, rtol=1e-4), name
