"""``TrainConfig``: how ``AgentTrainer`` runs rollouts and the trainer."""

from __future__ import annotations

import os
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_MAX_TOKENS", "TrainConfig"]


DEFAULT_MAX_TOKENS = 64
"""Completion budget per call of ``TrainConfig``'s default sampling (``rllm-cli train
--max-tokens``' default)."""


class TrainConfig(BaseModel):
    """How ``AgentTrainer`` runs rollouts and the trainer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(default_factory=lambda: f"train-{uuid.uuid4().hex[:10]}")
    """Run id of every rollout and of the policy updates."""
    gateway_url: str = Field(
        default_factory=lambda: os.environ.get("RLLM_GATEWAY_URL", "http://127.0.0.1:8400")
    )
    """The gateway in front of the model server (``rllm-cli up`` starts both); default
    ``$RLLM_GATEWAY_URL``, as for ``rllm-cli eval`` and ``train``."""
    admin_key: str | None = None
    """The gateway's admin key, if it has one."""
    model: str = "HuggingFaceTB/SmolLM2-135M-Instruct"
    """Model name the rollouts request (as served)."""
    group_size: int = Field(default=8, ge=1)
    """Rollouts per task (the GRPO group)."""
    batch_size: int = Field(default=4, ge=1)
    """Tasks per policy update."""
    epochs: int = Field(default=1, ge=1)
    """Passes over the training set."""
    max_updates: int = Field(default=0, ge=0)
    """Stop after this many updates (0: after the epochs)."""
    mode: str = "sync"
    """sync: each batch of rollouts waits for the previous update; async: bounded
    off-policy (the trainer's max_staleness)."""
    sampling: dict[str, Any] = Field(
        default_factory=lambda: {"temperature": 1.0, "max_tokens": DEFAULT_MAX_TOKENS}
    )
    """Sampling parameters of the rollouts. The default caps each call at
    ``DEFAULT_MAX_TOKENS``, as ``rllm-cli train`` does: a small model's unbounded chat reply
    can run to its context length, minutes per call on a CPU."""
    concurrency: int = Field(default=0, ge=0)
    """Rollouts in flight (0: a whole batch, ``batch_size * group_size``, at once, so the
    model server generates it as one batch)."""
    max_minutes: float = Field(default=0.0, ge=0)
    """Stop starting new batches after this many minutes of wall time (0: no limit)."""
    update_timeout_s: float = Field(default=900.0, gt=0)
    """How long a batch waits for its update before the run fails with a reason."""
    trainer: dict[str, Any] = Field(default_factory=dict)
    """More TrainerSettings fields (lr, loss, loss_agg, kl_coef, model, checkpoint_dir, ...)."""
