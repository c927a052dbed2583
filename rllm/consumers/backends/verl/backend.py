"""The ``verl`` backend: batches go to verl's actor as ``DataProto``; needs GPUs and verl."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rllm.consumers.backends.verl.convert import (
    VERL_ESTIMATORS,
    to_data_proto,
    to_verl_batch,
    verl_config,
)
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import Capabilities, LossAgg, LossKind, TrainBatch, UpdateResult
from rllm.errors import ConfigError

__all__ = ["VERL_CAPABILITIES", "VerlBackend"]

VERL_CAPABILITIES = Capabilities(
    # verl has no estimator with the plain reward of loss=reinforce (its REINFORCE++ is
    # estimator reinforce_plus_plus under loss=grpo), so loss=reinforce is refused.
    losses=frozenset({LossKind.GRPO, LossKind.RLOO}),
    loss_aggs=frozenset(LossAgg),
    kl=True,
    clipping=True,
    lora=True,
    full_finetune=True,
    estimators=frozenset(VERL_ESTIMATORS),
)


class VerlBackend:
    """Drives a verl actor worker group (FSDP) with vLLM/SGLang rollout servers."""

    name = "verl"
    capabilities = VERL_CAPABILITIES

    def __init__(self, settings: TrainerSettings, actor: Any = None) -> None:
        import torch

        if actor is None and (
            importlib.util.find_spec("verl") is None or not torch.cuda.is_available()
        ):
            raise ConfigError(
                "backend 'verl' needs the verl package and CUDA GPUs (found "
                f"verl={importlib.util.find_spec('verl') is not None}, "
                f"cuda={torch.cuda.is_available()}); use --backend local here"
            )
        self.settings = settings
        self.config = verl_config(settings, max(torch.cuda.device_count(), 1))
        self.actor = actor
        """verl's actor worker group: ``update_actor(DataProto)``, ``save_checkpoint``."""
        self._version = 0

    @property
    def version(self) -> int:
        """Current policy version."""
        return self._version

    @property
    def base_model(self) -> str:
        """The model verl started from."""
        return self.settings.model

    def update(self, batch: TrainBatch) -> UpdateResult:
        """One actor update on the batch."""
        out = self.actor.update_actor(to_data_proto(to_verl_batch(batch, 0)))
        self._version += 1
        metrics = getattr(out, "meta_info", {}).get("metrics", {})
        return UpdateResult(
            self._version, {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}
        )

    def save(self, directory: Path) -> str:
        """Actor checkpoint via verl."""
        self.actor.save_checkpoint(str(directory))
        return directory.resolve().as_uri()

    def load(self, directory: Path, version: int) -> None:
        """Restore the actor from a verl checkpoint."""
        self.actor.load_checkpoint(str(directory))
        self._version = version

    def close(self) -> None:
        """Nothing held outside this process."""
