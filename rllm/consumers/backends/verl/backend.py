"""The ``verl`` backend: verl's own actor (and reference) worker groups, FSDP on GPUs.

Built as verl's PPO trainer builds them (``workers.py``): verl's config from our settings,
checked by verl's config classes, then a Ray resource pool and ``ActorRolloutRefWorker``
groups. Everything that can be refused is refused here, at construction: verl missing, a
setting verl's config classes reject, no model, no CUDA (verl's FSDP worker needs it).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rllm.consumers.backends.base import BackendBase
from rllm.consumers.backends.verl.convert import VERL_ESTIMATORS, to_data_proto, to_verl_batch
from rllm.consumers.trainer.errors import CheckpointError
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import Capabilities, LossAgg, LossKind, TrainBatch, UpdateResult
from rllm.errors import ConfigError

__all__ = ["VERL_CAPABILITIES", "VerlBackend"]

VERL_SUBDIR = "verl"
"""Where in a checkpoint folder verl's own checkpoint (sharded model, optimizer) goes."""

VERL_CAPABILITIES = Capabilities(
    # verl has no estimator with the plain reward of loss=reinforce (its REINFORCE++ is
    # estimator reinforce_plus_plus under loss=grpo), so loss=reinforce is refused.
    losses=frozenset({LossKind.GRPO, LossKind.RLOO}),
    loss_aggs=frozenset(LossAgg),
    kl=True,
    clipping=True,
    # refused at start until checked on a GPU: with lora_rank > 0 verl writes its
    # huggingface/ folder from the PEFT-wrapped model, which a vLLM or SGLang server may
    # not load, and a failed load at the first sync is what this backend must not do
    lora=False,
    full_finetune=True,
    estimators=frozenset(VERL_ESTIMATORS),
)


class VerlBackend(BackendBase):
    """Drives verl's actor worker group (FSDP); the gateway's servers load its checkpoints.

    ``actor`` and ``ref`` may be handed in (worker groups built elsewhere); otherwise the
    backend builds them from ``settings``.
    """

    name = "verl"
    capabilities = VERL_CAPABILITIES

    def __init__(self, settings: TrainerSettings, actor: Any = None, ref: Any = None) -> None:
        import torch

        if importlib.util.find_spec("verl") is None:
            raise ConfigError(
                "backend 'verl' needs the verl package (pip install verl==0.9.1, in a venv "
                "of its own: it needs transformers 5) and CUDA GPUs; use --backend local here"
            )
        from rllm.consumers.backends.verl.workers import compose_config, needs_reference

        super().__init__(settings)
        n_gpus = max(torch.cuda.device_count(), 1)
        self.config = compose_config(settings, n_gpus)
        """verl's full ``ppo_trainer`` config (an OmegaConf DictConfig)."""
        self._own_ray = False
        if actor is None:
            if not settings.model:
                raise ConfigError("backend 'verl' needs model= (an HF model id or directory)")
            if not torch.cuda.is_available():
                raise ConfigError(
                    "backend 'verl' builds verl's FSDP actor worker, which needs CUDA GPUs: "
                    "torch.cuda.is_available() is False here; use --backend local"
                )
            actor, ref = self._build(n_gpus, with_ref=needs_reference(self.config))
        self.actor = actor
        """verl's actor worker group: ``update_actor``, ``save_checkpoint``."""
        self.ref = ref
        """verl's reference worker group (KL loss), or None."""

    def _build(self, n_gpus: int, with_ref: bool) -> tuple[Any, Any]:
        import ray  # comes with verl

        from rllm.consumers.backends.verl.workers import build_worker_groups

        if not ray.is_initialized():
            ray.init()
            self._own_ray = True
        actor, ref = build_worker_groups(self.config, n_gpus, use_gpu=True)
        if ref is not None:
            ref.init_model()
        actor.init_model()
        return actor, ref

    def update(self, batch: TrainBatch) -> UpdateResult:
        """One actor update on the batch (reference log-probs first when KL is on)."""
        from rllm.consumers.backends.verl.workers import (
            ref_inputs,
            ref_log_probs,
            update_inputs,
        )

        data = to_data_proto(to_verl_batch(batch, 0))
        if self.ref is not None:
            td = ref_inputs(data)
            data.batch["ref_log_prob"] = ref_log_probs(self.ref.compute_ref_log_prob(td), td)
        out = self.actor.update_actor(update_inputs(data, self.config))
        self._version += 1
        return UpdateResult(self._version, _metrics(out))

    def save(self, directory: Path) -> str:
        """Actor checkpoint via verl in ``directory/verl``, its HF weights (verl's
        ``huggingface`` folder) moved up into ``directory``: the folder the policy update
        names is one vLLM, SGLang and our model server load as it is, and keeps its version's
        name (the gateway's ``upstream_checkpoint_dir`` maps it by that name)."""
        verl_dir = directory / VERL_SUBDIR
        self.actor.save_checkpoint(str(verl_dir), global_step=self._version)
        hf = verl_dir / "huggingface"
        if not (hf / "config.json").is_file():
            raise CheckpointError(
                f"verl saved no HF weights under {hf} (checkpoint.save_contents lacks "
                f"hf_model?): the rollout servers would have nothing to load"
            )
        for item in hf.iterdir():
            item.replace(directory / item.name)
        return directory.resolve().as_uri()

    def load(self, directory: Path, version: int) -> None:
        """Restore the actor from a checkpoint ``save`` wrote."""
        self.actor.load_checkpoint(str(directory / VERL_SUBDIR))
        self._version = version

    def close(self) -> None:
        """Shut down the Ray cluster this backend started (its worker groups with it)."""
        if self._own_ray:
            import ray

            ray.shutdown()
            self._own_ray = False


def _metrics(out: Any) -> dict[str, float]:
    """verl's update metrics (numbers, or per-micro-batch lists averaged) as floats."""
    try:
        raw = out.get("metrics", {}) if hasattr(out, "get") else {}
    except (KeyError, TypeError):
        raw = {}
    if hasattr(raw, "data"):  # a tensordict NonTensorData
        raw = raw.data
    metrics = {}
    for key, value in dict(raw).items():
        values = value if isinstance(value, list) else [value]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        if numbers:
            metrics[key] = sum(numbers) / len(numbers)
    return metrics
