"""``TrainConfig``: how ``AgentTrainer`` runs rollouts and the trainer."""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from rllm.consumers.trainer.settings import SyncMode, TrainerSettings
from rllm.errors import ConfigError

__all__ = ["DEFAULT_MAX_TOKENS", "TrainConfig", "TrainerOverrides", "train_config"]


DEFAULT_MAX_TOKENS = 64
"""Completion budget per call of ``TrainConfig``'s default sampling (``rllm-cli train
--max-tokens``' default)."""


def _override(name: str) -> tuple[Any, Any]:
    """``TrainerSettings.<name>``'s type and constraints, optional, unset by default."""
    field = TrainerSettings.model_fields[name]
    kind: Any = field.annotation
    if field.metadata:
        kind = Annotated[kind, *field.metadata]
    return kind | None, None


if TYPE_CHECKING:
    TrainerOverrides = BaseModel
else:
    TrainerOverrides = create_model(
        "TrainerOverrides",
        __config__=ConfigDict(frozen=True, extra="forbid"),
        __doc__="TrainerSettings fields a run sets, typed and bounded as there (the fields "
        "not set keep their RLLM_ variable, then their default).",
        **{name: _override(name) for name in TrainerSettings.model_fields},
    )


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
    """Stop after this many policy updates made (0: after the epochs). A batch that makes
    none (its groups all dropped, e.g. uniform rewards) does not count."""
    mode: SyncMode = SyncMode.SYNC
    """sync: each batch of rollouts waits for the previous update to be served; async:
    bounded off-policy (the trainer's max_staleness). ``"sync"``/``"async"`` work too."""
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
    trainer: TrainerOverrides = Field(default_factory=lambda: TrainerOverrides())
    """More TrainerSettings fields (lr, loss, loss_agg, kl_coef, model, checkpoint_dir, ...),
    as ``TrainerOverrides`` or a dict of them: checked by the fields' types and bounds here,
    an unknown name refused."""

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, value: Any) -> Any:
        """Refuse a mode that is none of ``SyncMode``'s, naming the value and the choices."""
        choices = [m.value for m in SyncMode]
        if isinstance(value, SyncMode) or value in choices:
            return value
        raise ValueError(f"mode must be {' or '.join(choices)}, got {value!r}")


def train_config(fields: TrainConfig | dict[str, Any] | None) -> TrainConfig:
    """A TrainConfig from itself or a dict of its fields.

    Raises:
        ConfigError: a field is bad (pydantic's message for it: the field, the value, why).
    """
    if isinstance(fields, TrainConfig):
        return fields
    from pydantic import ValidationError

    try:
        return TrainConfig(**(fields or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        why = str(first["msg"]).removeprefix("Value error, ")
        if not why.startswith(where):
            why = f"TrainConfig.{where}: {why}, got {first.get('input')!r}"
        raise ConfigError(why) from exc
