"""Training sequences to padded, shifted ``[B, T]`` tensors (targets are the next tokens).

Sequences of one group usually share their prompt. ``shared_prefix`` finds the leading
tokens a micro-batch has in common and from which no loss token is predicted; the model
runs them once (``prefix_ids_1P``) and the per-sequence tensors start after them. The
gradient is the same as without sharing: the prefix's activations feed every sequence's
suffix through the attention cache, and autograd sums their contributions.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch

from rllm.consumers.trainer.types import TrainSequence

__all__ = ["SequenceTensors", "group_by_prefix", "shared_prefix", "to_tensors"]


@dataclass
class SequenceTensors:
    """Right-padded tensors of a micro-batch; position t predicts ``targets_BT[:, t]``.

    With ``prefix_ids_1P``, column 0 of the ``_BT`` tensors is the sequence's position
    ``P`` (the prefix's length): the model runs the prefix first and the rest on its cache.
    """

    input_ids_BT: torch.Tensor
    attention_BT: torch.Tensor
    targets_BT: torch.Tensor
    mask_BT: torch.Tensor
    old_logprobs_BT: torch.Tensor
    advantages_BT: torch.Tensor
    teacher_logprobs_BT: torch.Tensor | None
    prefix_ids_1P: torch.Tensor | None = None
    temperature_B: torch.Tensor | None = None
    """Each row's sampling temperature (with ``top_p_B``, ``top_k_B``: ``StepSampling``)."""
    top_p_B: torch.Tensor | None = None
    top_k_B: torch.Tensor | None = None


def _first_loss_target(s: TrainSequence) -> int:
    """Index of the first token that carries loss (``len`` when none does)."""
    try:
        return s.loss_mask_T.index(1)
    except ValueError:
        return len(s.loss_mask_T)


def shared_prefix(seqs: list[TrainSequence]) -> int:
    """How many leading input tokens all ``seqs`` share without predicting a loss token.

    Position ``t`` predicts token ``t + 1``, so a prefix of ``P`` tokens is free of loss
    when no sequence has a loss token at or before index ``P``.
    """
    if len(seqs) < 2:
        return 0
    limit = min(_first_loss_target(s) for s in seqs) - 1
    first = seqs[0].input_ids_T
    n = 0
    while n < limit and all(len(s.input_ids_T) > n and s.input_ids_T[n] == first[n] for s in seqs):
        n += 1
    return max(n, 0)


def group_by_prefix(seqs: list[TrainSequence], size: int) -> list[list[TrainSequence]]:
    """Micro-batches of at most ``size`` sequences, sequences with the same tokens before
    their first loss token together (a group's samples of one prompt), in first-seen order."""
    groups: dict[Hashable, list[TrainSequence]] = {}
    for s in seqs:
        key = tuple(s.input_ids_T[: _first_loss_target(s)])
        groups.setdefault(key, []).append(s)
    return [g[i : i + size] for g in groups.values() for i in range(0, len(g), size)]


def to_tensors(
    seqs: list[TrainSequence], pad_id: int, device: str = "cpu", prefix: int = 0
) -> SequenceTensors:
    """Pad and shift ``seqs``: inputs are ``ids[prefix:-1]``, targets ``ids[prefix + 1:]``,
    and the first ``prefix`` tokens (which must be the same in every sequence, see
    ``shared_prefix``) become ``prefix_ids_1P``."""
    t_max = max(len(s.input_ids_T) - 1 - prefix for s in seqs)
    b = len(seqs)
    ids = torch.full((b, t_max), pad_id, dtype=torch.long)
    attn = torch.zeros((b, t_max), dtype=torch.long)
    tgt = torch.full((b, t_max), pad_id, dtype=torch.long)
    mask = torch.zeros((b, t_max))
    old = torch.zeros((b, t_max))
    adv = torch.zeros((b, t_max))
    has_teacher = all(s.teacher_logprobs_T is not None for s in seqs)
    teacher = torch.zeros((b, t_max)) if has_teacher else None
    for i, s in enumerate(seqs):
        n = len(s.input_ids_T) - 1 - prefix
        at = prefix + 1
        ids[i, :n] = torch.tensor(s.input_ids_T[prefix:-1])
        attn[i, :n] = 1
        tgt[i, :n] = torch.tensor(s.input_ids_T[at:])
        mask[i, :n] = torch.tensor(s.loss_mask_T[at:], dtype=torch.float32)
        old[i, :n] = torch.tensor(s.logprobs_T[at:], dtype=torch.float32)
        adv[i, :n] = s.advantage
        if teacher is not None and s.teacher_logprobs_T is not None:
            teacher[i, :n] = torch.tensor(s.teacher_logprobs_T[at:], dtype=torch.float32)
    shared = None
    if prefix:
        shared = torch.tensor([seqs[0].input_ids_T[:prefix]], dtype=torch.long).to(device)
    return SequenceTensors(
        input_ids_BT=ids.to(device),
        attention_BT=attn.to(device),
        targets_BT=tgt.to(device),
        mask_BT=mask.to(device),
        old_logprobs_BT=old.to(device),
        advantages_BT=adv.to(device),
        teacher_logprobs_BT=None if teacher is None else teacher.to(device),
        prefix_ids_1P=shared,
        temperature_B=torch.tensor([s.sampling.temperature for s in seqs]).to(device),
        top_p_B=torch.tensor([s.sampling.top_p for s in seqs]).to(device),
        top_k_B=torch.tensor([s.sampling.top_k for s in seqs]).to(device),
    )
