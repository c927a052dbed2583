"""verl's own config, worker groups and update inputs for our trainer settings (needs verl).

The config is verl's full ``ppo_trainer`` config (its generated YAML) with our settings
applied as overrides, then checked by verl's own dataclasses (``FSDPActorConfig``,
``AlgoConfig``) and their runtime ``validate``: a value verl would reject fails here, at
start, as a ``ConfigError`` naming our setting. Worker groups are built the way verl's PPO
trainer builds them: a ``RayResourcePool``, ``ActorRolloutRefWorker`` wrapped in
``RayClassWithInitArgs``, one ``RayWorkerGroup`` per role (``actor``, and ``ref`` when
``need_reference_policy`` says the KL loss needs one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rllm.consumers.backends.verl.convert import verl_config
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.errors import ConfigError

__all__ = [
    "SETTING_OF",
    "build_worker_groups",
    "compose_config",
    "needs_reference",
    "update_inputs",
]

SETTING_OF = {
    "actor_rollout_ref.model.path": "model",
    "actor_rollout_ref.model.lora_rank": "lora_rank",
    "actor_rollout_ref.actor.optim.lr": "lr",
    "actor_rollout_ref.actor.optim.weight_decay": "weight_decay",
    "actor_rollout_ref.actor.grad_clip": "max_grad_norm",
    "actor_rollout_ref.actor.clip_ratio_low": "clip_eps_low",
    "actor_rollout_ref.actor.clip_ratio_high": "clip_eps_high",
    "actor_rollout_ref.actor.clip_ratio_c": "clip_ratio_c",
    "actor_rollout_ref.actor.loss_agg_mode": "loss_agg",
    "actor_rollout_ref.actor.kl_loss_coef": "kl_coef",
    "actor_rollout_ref.actor.use_kl_loss": "kl_coef",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "micro_batch_size",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "batch_size",
    "data.train_batch_size": "batch_size",
    "algorithm.adv_estimator": "loss",
}
"""Which of our settings each verl key comes from (for errors that name the setting)."""


def _verl_yaml() -> Path:
    import verl.trainer.config  # optional: the verl venv

    return Path(verl.trainer.config.__file__).with_name("_generated_ppo_trainer.yaml")


def compose_config(settings: TrainerSettings, n_gpus: int) -> Any:
    """verl's ``ppo_trainer`` config with our settings, checked by verl's config classes.

    Raises:
        ConfigError: naming our setting and its value when verl refuses what it became.
    """
    from omegaconf import OmegaConf  # comes with verl
    from verl.utils.config import omega_conf_to_dataclass

    overrides = verl_config(settings, n_gpus)
    overrides.update(
        {
            # One optimizer step per trainer batch: the whole batch is one mini-batch.
            "data.train_batch_size": settings.batch_size,
            "actor_rollout_ref.actor.ppo_mini_batch_size": settings.batch_size,
            "actor_rollout_ref.actor.ppo_epochs": 1,
            "actor_rollout_ref.actor.strategy": "fsdp",
            "actor_rollout_ref.rollout.n": 1,
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": (
                settings.micro_batch_size
            ),
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": settings.micro_batch_size,
            # The rollout servers the gateway calls load HF weights, so checkpoints carry them.
            "actor_rollout_ref.actor.checkpoint.save_contents": [
                "model",
                "optimizer",
                "extra",
                "hf_model",
            ],
            "actor_rollout_ref.model.path": settings.model or "unset",
        }
    )
    cfg = OmegaConf.load(_verl_yaml())
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value, force_add=False)
    try:
        actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
        omega_conf_to_dataclass(cfg.algorithm)
        actor.validate(n_gpus, cfg.data.train_batch_size)
    except (ValueError, AssertionError, TypeError) as exc:
        raise ConfigError(
            f"backend 'verl': verl refuses these settings ({_named(exc, settings)})"
        ) from exc
    return cfg


def _named(exc: BaseException, settings: TrainerSettings) -> str:
    """verl's message, with the settings its keys came from and their values."""
    text = str(exc)
    named = {
        f"{name}={getattr(settings, name)!r}"
        for key, name in SETTING_OF.items()
        if key.rsplit(".", 1)[-1] in text
    }
    return f"{text}; from {', '.join(sorted(named))}" if named else text


def needs_reference(cfg: Any) -> bool:
    """verl's own rule: a reference policy when the KL loss (or KL in reward) is on."""
    from verl.trainer.ppo.utils import need_reference_policy

    return bool(need_reference_policy(cfg))


def build_worker_groups(cfg: Any, n_workers: int, use_gpu: bool) -> tuple[Any, Any | None]:
    """The actor worker group, and the reference one when KL needs it, on one Ray pool.

    Ray must be initialized. ``use_gpu=False`` gives a CPU resource pool (verl allows it;
    the workers are constructed but FSDP's ``init_model`` needs CUDA).
    """
    import ray  # comes with verl
    from verl.single_controller.ray import (
        RayClassWithInitArgs,
        RayResourcePool,
        RayWorkerGroup,
    )
    from verl.workers.engine_workers import ActorRolloutRefWorker

    with_ref = needs_reference(cfg)
    pool = RayResourcePool(
        process_on_nodes=[n_workers], use_gpu=use_gpu, max_colocate_count=2 if with_ref else 1
    )
    device = "cuda" if use_gpu else "cpu"
    remote_cls = ray.remote(ActorRolloutRefWorker)

    def group(role: str) -> Any:
        cls = RayClassWithInitArgs(cls=remote_cls, config=cfg.actor_rollout_ref, role=role)
        return RayWorkerGroup(
            resource_pool=pool, ray_cls_with_init=cls, name_prefix=role, device_name=device
        )

    return group("actor"), group("ref") if with_ref else None


def update_inputs(data: Any, cfg: Any) -> Any:
    """A ``DataProto`` batch as the ``TensorDict`` verl's trainer hands ``update_actor``.

    The same steps as verl's ``RayPPOTrainer._update_actor``: to a TensorDict, left/right
    padding to no-padding (nested tensors), and the loop settings as non-tensor entries.
    """
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    actor = cfg.actor_rollout_ref.actor
    data.meta_info["multi_turn"] = True
    data.meta_info["temperature"] = cfg.actor_rollout_ref.rollout.temperature
    td = left_right_2_no_padding(data.to_tensordict())
    mini = actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    tu.assign_non_tensor(
        td,
        calculate_entropy=bool(actor.calculate_entropy or actor.entropy_coeff != 0.0),
        distillation_use_topk=False,
        distillation_only=False,
        global_batch_size=mini,
        mini_batch_size=mini,
        epochs=actor.ppo_epochs,
        seed=actor.data_loader_seed,
        dataloader_kwargs={"shuffle": actor.shuffle},
        compute_loss=True,
    )
    return td


def ref_inputs(data: Any) -> Any:
    """A ``DataProto`` batch as the ``TensorDict`` for ``compute_ref_log_prob``."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(data.to_tensordict())
    tu.assign_non_tensor(td, calculate_entropy=False, compute_loss=False)
    return td


def ref_log_probs(output: Any, td: Any) -> Any:
    """The reference worker's output back in the padded ``[B, R]`` layout."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    return no_padding_2_padding(tu.get(output, "log_probs"), td).float()
