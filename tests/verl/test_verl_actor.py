"""The verl backend against verl itself (0.9.1, CPU): its config classes, ``DataProto``,
the tensors its trainer hands ``update_actor``, its worker groups on a CPU Ray pool, and the
checkpoint folder the rollout servers load.

Runs in the verl venv (``make test-verl``), not the main one: verl needs transformers 5,
which the main venv cannot have. FSDP's ``init_model`` and ``update_actor`` need CUDA and
are not run here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import FSDPActorConfig

from rllm.consumers.backends import make_backend
from rllm.consumers.backends.verl.backend import VerlBackend
from rllm.consumers.backends.verl.convert import to_data_proto, to_verl_batch
from rllm.consumers.backends.verl.workers import (
    build_worker_groups,
    compose_config,
    needs_reference,
    ref_inputs,
    update_inputs,
)
from rllm.consumers.trainer.settings import BackendName, TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind
from rllm.errors import ConfigError
from tests.unit.consumers.trainer.factory import ragged_batch

pytestmark = pytest.mark.filterwarnings(
    # verl 0.9.1 imports ray.experimental.state, which Ray 2.60 deprecates
    "ignore:Ray state API is no longer experimental:DeprecationWarning"
)


def test_settings_become_verls_own_actor_and_algorithm_config() -> None:
    settings = TrainerSettings(
        model="Qwen/Qwen2.5-0.5B",
        loss_agg=LossAgg.SEQ_MEAN_TOKEN_SUM,
        kl_coef=0.01,
        clip_eps_low=0.1,
        clip_eps_high=0.28,
        clip_ratio_c=5.0,
        lr=3e-6,
        weight_decay=0.05,
        max_grad_norm=0.5,
        micro_batch_size=2,
        batch_size=8,
        lora_rank=16,
    )
    cfg = compose_config(settings, 2)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert type(actor) is FSDPActorConfig
    assert (actor.strategy, actor.loss_agg_mode) == ("fsdp", "seq-mean-token-sum")
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.1, 0.28, 5.0)
    assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type) == (True, 0.01, "low_var_kl")
    assert (actor.optim.lr, actor.optim.weight_decay, actor.grad_clip) == (3e-6, 0.05, 0.5)
    assert (actor.ppo_mini_batch_size, actor.ppo_micro_batch_size_per_gpu) == (8, 2)
    assert actor.ppo_epochs == 1
    assert "hf_model" in actor.checkpoint.save_contents
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert type(algo) is AlgoConfig and algo.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-0.5B"
    assert cfg.actor_rollout_ref.model.lora_rank == 16
    assert (cfg.trainer.n_gpus_per_node, cfg.trainer.nnodes) == (2, 1)


def test_reference_policy_only_when_kl_needs_it() -> None:
    assert needs_reference(compose_config(TrainerSettings(kl_coef=0.02), 1)) is True
    assert needs_reference(compose_config(TrainerSettings(kl_coef=0.0), 1)) is False


def test_rloo_estimator_reaches_verl_and_reinforce_is_refused() -> None:
    cfg = compose_config(TrainerSettings(loss=LossKind.RLOO), 1)
    assert omega_conf_to_dataclass(cfg.algorithm).adv_estimator == "rloo"
    with pytest.raises(ConfigError, match="loss=reinforce"):
        compose_config(TrainerSettings(loss=LossKind.REINFORCE), 1)


def test_batch_is_a_real_data_proto() -> None:
    data = to_data_proto(to_verl_batch(ragged_batch(), pad_id=0))
    assert isinstance(data, DataProto) and len(data) == 2
    assert data.batch["responses"].tolist() == [[10, 11, 20, 12], [9, 0, 0, 0]]
    assert data.batch["prompts"].tolist() == [[1, 2, 3], [0, 5, 6]]
    assert data.batch["response_mask"].tolist() == [[1, 1, 0, 1], [1, 0, 0, 0]]
    assert list(data.non_tensor_batch["uid"]) == ["ep", "ep2"]
    first, second = data.chunk(2)
    assert list(first.non_tensor_batch["session_id"]) == ["s"]
    assert second.batch["advantages"].tolist() == [[-1.0, 0.0, 0.0, 0.0]]


def test_update_inputs_are_verls_unpadded_tensordict() -> None:
    cfg = compose_config(TrainerSettings(batch_size=2, micro_batch_size=1), 1)
    td = update_inputs(to_data_proto(to_verl_batch(ragged_batch(), pad_id=0)), cfg)
    ids = td["input_ids"]
    assert ids.is_nested
    assert [t.tolist() for t in ids.unbind()] == [[1, 2, 3, 10, 11, 20, 12], [5, 6, 9]]
    assert (tu.get(td, "global_batch_size"), tu.get(td, "mini_batch_size")) == (2, 2)
    assert (tu.get(td, "epochs"), tu.get(td, "compute_loss")) == (1, True)
    ref = ref_inputs(to_data_proto(to_verl_batch(ragged_batch(), pad_id=0)))
    assert tu.get(ref, "compute_loss") is False


def test_backend_refuses_at_start_without_cuda() -> None:
    assert not torch.cuda.is_available()
    with pytest.raises(ConfigError, match=r"FSDP actor worker, which needs CUDA.*is False"):
        make_backend(TrainerSettings(backend=BackendName.VERL, model="Qwen/Qwen2.5-0.5B"))
    with pytest.raises(ConfigError, match="needs model="):
        make_backend(TrainerSettings(backend=BackendName.VERL))


class SavingActor:
    """Stands in for the actor worker group's checkpoint calls (FSDP needs CUDA): writes
    what verl 0.9.1's FSDP checkpoint manager writes with ``hf_model`` in save_contents."""

    def __init__(self) -> None:
        self.loaded: list[str] = []

    def save_checkpoint(self, local_path: str, global_step: int = 0) -> None:
        path = Path(local_path)
        (path / "huggingface").mkdir(parents=True)
        (path / "model_world_size_1_rank_0.pt").write_bytes(b"shard")
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            (path / "huggingface" / name).write_text(f"{name} of step {global_step}")

    def load_checkpoint(self, local_path: str) -> None:
        self.loaded.append(local_path)


def test_a_checkpoint_folder_is_what_the_rollout_servers_load(tmp_path: Path) -> None:
    actor: Any = SavingActor()
    backend = VerlBackend(TrainerSettings(model="m", kl_coef=0.0), actor=actor)
    folder = tmp_path / "r" / "v000001"
    assert backend.save(folder) == folder.resolve().as_uri()
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "verl",
    ]
    assert (folder / "config.json").read_text() == "config.json of step 0"
    assert (folder / "verl" / "model_world_size_1_rank_0.pt").is_file()
    backend.load(folder, 1)
    assert (actor.loaded, backend.version) == ([str(folder / "verl")], 1)


def test_a_verl_checkpoint_without_hf_weights_is_an_error(tmp_path: Path) -> None:
    actor: Any = SavingActor()
    actor.save_checkpoint = lambda local_path, global_step=0: Path(local_path).mkdir(parents=True)
    backend = VerlBackend(TrainerSettings(model="m", kl_coef=0.0), actor=actor)
    with pytest.raises(RuntimeError, match=r"verl saved no HF weights under .*huggingface"):
        backend.save(tmp_path / "v1")


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Ray of 2 CPUs of its own: the pool's placement group takes both (one bundle of
    ``max_colocate_count`` CPUs), so each test that builds a pool gets a fresh Ray. Ray's
    memory monitor is off: on a machine shared with other jobs it killed the idle workers
    (at 95% of the node's memory used, most of it not theirs)."""
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_actor_and_reference_worker_groups_share_one_cpu_pool(local_ray: None) -> None:
    cfg = compose_config(TrainerSettings(model="m", kl_coef=0.01), 1)
    actor, ref = build_worker_groups(cfg, 1, use_gpu=False)
    assert (actor.world_size, ref.world_size) == (1, 1)
    for group in (actor, ref):
        assert {"update_actor", "compute_ref_log_prob", "save_checkpoint"} <= set(dir(group))
    roles = [
        ray.get(g.workers[0].__ray_call__.remote(lambda w: (w.role, w.rank, w.world_size)))
        for g in (actor, ref)
    ]
    assert roles == [("actor", 0, 1), ("ref", 0, 1)]
    groups = [name for name in ray.available_resources() if name.startswith("CPU_group_")]
    assert len(groups) == 2, f"one placement group (its name and bundle 0), got {groups}"


def test_no_reference_worker_group_without_kl(local_ray: None) -> None:
    actor, ref = build_worker_groups(compose_config(TrainerSettings(model="m"), 1), 1, False)
    assert ref is None
    role = ray.get(actor.workers[0].__ray_call__.remote(lambda w: (w.role, w.world_size)))
    assert role == ("actor", 1)
