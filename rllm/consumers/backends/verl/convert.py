"""A trainer batch in verl's ``DataProto`` layout, and the verl config for our settings.

Tensors (``batch``): ``prompts`` [B, P] left-padded, ``responses`` [B, R] right-padded,
``input_ids`` = prompts ++ responses, ``attention_mask``, ``position_ids``,
``response_mask`` [B, R] (1 on sampled tokens; tool output inside a merged multi-turn
response is 0), ``old_log_probs`` and ``advantages`` [B, R]. Non-tensors: ``uid`` (episode
id, verl's group key) and ``session_id``. A sequence's prompt ends at its first sampled
token, as in verl's multi-turn rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import TrainBatch
from rllm.errors import ConfigError
from rllm.schemas.types import Estimator

__all__ = ["VERL_ESTIMATORS", "VerlBatch", "to_data_proto", "to_verl_batch", "verl_config"]


@dataclass
class VerlBatch:
    """The three parts of a ``DataProto``: tensors, non-tensors, meta info."""

    batch: dict[str, torch.Tensor]
    non_tensor_batch: dict[str, np.ndarray[Any, Any]]
    meta_info: dict[str, Any] = field(default_factory=dict)


def to_verl_batch(batch: TrainBatch, pad_id: int) -> VerlBatch:
    """Split each sequence at its first sampled token and pad into verl's layout."""
    splits = []
    for s in batch.sequences:
        first = s.loss_mask_T.index(1) if 1 in s.loss_mask_T else len(s.input_ids_T)
        splits.append((s, first))
    p_len = max(first for _, first in splits)
    r_len = max(len(s.input_ids_T) - first for s, first in splits)
    b = len(splits)
    prompts = torch.full((b, p_len), pad_id, dtype=torch.long)
    responses = torch.full((b, r_len), pad_id, dtype=torch.long)
    p_mask = torch.zeros((b, p_len), dtype=torch.long)
    r_attn = torch.zeros((b, r_len), dtype=torch.long)
    r_mask = torch.zeros((b, r_len), dtype=torch.long)
    old = torch.zeros((b, r_len))
    adv = torch.zeros((b, r_len))
    for i, (s, first) in enumerate(splits):
        prompt, resp = s.input_ids_T[:first], s.input_ids_T[first:]
        if prompt:
            prompts[i, p_len - len(prompt) :] = torch.tensor(prompt)
            p_mask[i, p_len - len(prompt) :] = 1
        n = len(resp)
        responses[i, :n] = torch.tensor(resp)
        r_attn[i, :n] = 1
        r_mask[i, :n] = torch.tensor(s.loss_mask_T[first:])
        old[i, :n] = torch.tensor(s.logprobs_T[first:])
        adv[i, :n] = torch.tensor(s.loss_mask_T[first:], dtype=torch.float32) * s.advantage
    attn = torch.cat([p_mask, r_attn], 1)
    return VerlBatch(
        batch={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attn,
            "position_ids": (attn.cumsum(-1) - 1).clamp(min=0),
            "response_mask": r_mask,
            "old_log_probs": old,
            "advantages": adv,
        },
        non_tensor_batch={
            "uid": np.array([s.episode_id for s in batch.sequences], dtype=object),
            "session_id": np.array([s.session_id for s in batch.sequences], dtype=object),
        },
        meta_info={"global_token_num": attn.sum(-1).tolist(), "temperature": 1.0},
    )


def to_data_proto(vb: VerlBatch) -> Any:
    """A real ``verl.DataProto`` (needs ``verl`` installed).

    Raises:
        ConfigError: if verl is not installed.
    """
    try:
        from verl import DataProto  # optional, GPU-only
    except ImportError as exc:
        raise ConfigError(
            "backend 'verl' needs the verl package (pip install verl) on a machine with GPUs"
        ) from exc
    return DataProto.from_dict(
        tensors=vb.batch, non_tensors=vb.non_tensor_batch, meta_info=vb.meta_info
    )


VERL_ESTIMATORS = (
    Estimator.GRPO,
    Estimator.RLOO,
    Estimator.REINFORCE_PLUS_PLUS,
    Estimator.REINFORCE_PLUS_PLUS_BASELINE,
)
"""Our estimators that are verl's ``algorithm.adv_estimator`` of the same name."""


def verl_config(settings: TrainerSettings, n_gpus: int = 1) -> dict[str, Any]:
    """verl ``ppo_trainer`` overrides (dotted keys) for these settings."""
    estimator = settings.run_estimator()
    if estimator not in VERL_ESTIMATORS:
        raise ConfigError(
            f"backend 'verl' cannot honour loss={settings.loss.value} (estimator "
            f"{estimator}); verl trains the estimators {', '.join(VERL_ESTIMATORS)}"
        )
    return {
        "algorithm.adv_estimator": str(estimator),
        "actor_rollout_ref.model.path": settings.model,
        "actor_rollout_ref.model.lora_rank": settings.lora_rank,
        "actor_rollout_ref.actor.optim.lr": settings.lr,
        "actor_rollout_ref.actor.optim.weight_decay": settings.weight_decay,
        "actor_rollout_ref.actor.grad_clip": settings.max_grad_norm,
        "actor_rollout_ref.actor.clip_ratio_low": settings.clip_eps_low,
        "actor_rollout_ref.actor.clip_ratio_high": settings.clip_eps_high,
        "actor_rollout_ref.actor.clip_ratio_c": settings.clip_ratio_c,
        "actor_rollout_ref.actor.loss_agg_mode": settings.loss_agg.value,
        "actor_rollout_ref.actor.use_kl_loss": settings.kl_coef > 0,
        "actor_rollout_ref.actor.kl_loss_coef": settings.kl_coef,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": settings.micro_batch_size,
        "actor_rollout_ref.rollout.name": "vllm",
        "trainer.n_gpus_per_node": n_gpus,
        "trainer.nnodes": 1,
    }
