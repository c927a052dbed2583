"""Training sequences to padded, shifted ``[B, T]`` tensors (targets are the next tokens)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rllm.consumers.trainer.types import TrainSequence

__all__ = ["SequenceTensors", "to_tensors"]


@dataclass
class SequenceTensors:
    """Right-padded tensors of a micro-batch; position t predicts ``targets_BT[:, t]``."""

    input_ids_BT: torch.Tensor
    attention_BT: torch.Tensor
    targets_BT: torch.Tensor
    mask_BT: torch.Tensor
    old_logprobs_BT: torch.Tensor
    advantages_BT: torch.Tensor
    teacher_logprobs_BT: torch.Tensor | None


def to_tensors(seqs: list[TrainSequence], pad_id: int, device: str = "cpu") -> SequenceTensors:
    """Pad and shift ``seqs``: inputs are ``ids[:-1]``, targets ``ids[1:]``."""
    t_max = max(len(s.input_ids_T) - 1 for s in seqs)
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
        n = len(s.input_ids_T) - 1
        ids[i, :n] = torch.tensor(s.input_ids_T[:-1])
        attn[i, :n] = 1
        tgt[i, :n] = torch.tensor(s.input_ids_T[1:])
        mask[i, :n] = torch.tensor(s.loss_mask_T[1:], dtype=torch.float32)
        old[i, :n] = torch.tensor(s.logprobs_T[1:], dtype=torch.float32)
        adv[i, :n] = s.advantage
        if teacher is not None and s.teacher_logprobs_T is not None:
            teacher[i, :n] = torch.tensor(s.teacher_logprobs_T[1:], dtype=torch.float32)
    return SequenceTensors(
        input_ids_BT=ids.to(device),
        attention_BT=attn.to(device),
        targets_BT=tgt.to(device),
        mask_BT=mask.to(device),
        old_logprobs_BT=old.to(device),
        advantages_BT=adv.to(device),
        teacher_logprobs_BT=None if teacher is None else teacher.to(device),
    )
