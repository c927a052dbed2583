"""Capability refusal, the local backend on a tiny model, verl's DataProto layout, and how
the fireworks backend is built (the hosted backends' calls: ``test_hosted_backends.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import SecretStr

from rllm.consumers.backends import make_backend
from rllm.consumers.backends.fireworks.backend import FireworksBackend
from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.backends.verl.convert import to_verl_batch, verl_config
from rllm.consumers.trainer.errors import CapabilityError
from rllm.consumers.trainer.settings import BackendName, TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, TrainSequence
from rllm.errors import ConfigError
from tests.unit.consumers.trainer.factory import batch, ragged_batch


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"backend": BackendName.LOCAL, "lora_rank": 8}, ["'local'", "lora_rank=8"]),
        (
            {"backend": BackendName.TINKER, "lora_rank": 8, "kl_coef": 0.1},
            ["'tinker'", "kl_coef=0.1"],
        ),
        ({"backend": BackendName.TINKER}, ["'tinker'", "lora_rank=0"]),
        (
            {"backend": BackendName.TINKER, "lora_rank": 8, "clip_eps_high": 0.28},
            ["'tinker'", "clip_eps_high=0.28"],
        ),
        ({"backend": BackendName.VERL, "loss": LossKind.DISTILL}, ["'verl'", "loss=distill"]),
        ({"backend": BackendName.VERL, "lora_rank": 16}, ["'verl'", "lora_rank=16"]),
        ({"backend": BackendName.FIREWORKS, "lora_rank": 8}, ["'fireworks'", "loss=grpo"]),
        (
            {"backend": BackendName.TINKER, "lora_rank": 8, "precision": "bf16"},
            ["'tinker'", "precision=bf16", "supported: fp32"],
        ),
        (
            {
                "backend": BackendName.FIREWORKS,
                "lora_rank": 8,
                "loss": LossKind.SFT,
                "loss_agg": LossAgg.SEQ_MEAN_TOKEN_SUM,
            },
            ["'fireworks'", "loss_agg=seq-mean-token-sum"],
        ),
    ],
)
def test_unsupported_setting_refused_before_training(
    overrides: dict[str, object], fragments: list[str]
) -> None:
    with pytest.raises(CapabilityError) as err:
        make_backend(TrainerSettings(model="/nonexistent", **overrides))  # type: ignore[arg-type]  # settings fields of several types
    for f in fragments:
        assert f in str(err.value)


def test_local_backend_update_checkpoint_roundtrip(tiny_model: Path, tmp_path: Path) -> None:
    settings = TrainerSettings(model=str(tiny_model), lr=1e-2, micro_batch_size=2, kl_coef=0.05)
    backend = make_backend(settings)
    assert isinstance(backend, LocalBackend)
    before = {k: v.clone() for k, v in backend.state_dict().items()}
    res = backend.update(batch())
    assert res.version == 1 == backend.version
    assert {"loss", "kl", "clip_frac", "grad_norm"} <= set(res.metrics)
    changed = [k for k, v in backend.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "no weight changed"
    uri = backend.save(tmp_path / "v1")
    assert uri.startswith("file://") and (tmp_path / "v1" / "optimizer.pt").is_file()
    other = LocalBackend(TrainerSettings(model=str(tiny_model)))
    other.load(tmp_path / "v1", 1)
    assert other.version == 1
    for k, v in backend.state_dict().items():
        assert torch.equal(other.state_dict()[k], v), k


def test_local_backend_gradient_only_from_sampled_tokens(tiny_model: Path) -> None:
    backend = LocalBackend(
        TrainerSettings(model=str(tiny_model), loss=LossKind.SFT, max_grad_norm=1e9)
    )
    model = backend.model
    # reference: the loss of the one sampled token (7 after prompt 3 4 5 6) alone
    model.zero_grad()
    logits = model(torch.tensor([[3, 4, 5, 6]])).logits
    (-torch.log_softmax(logits[0, -1], -1)[7]).backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    seq = TrainSequence("e", "s", ("x",), [3, 4, 5, 6, 7], [0, 0, 0, 0, 1], [0.0] * 5)
    backend.update(TrainBatch([seq], ["e"]))
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(got) == set(expected)
    for k, g in expected.items():
        assert torch.allclose(got[k], g, atol=1e-6), k
    with pytest.raises(ValueError, match="no token that carries loss"):
        backend.update(
            TrainBatch([TrainSequence("e", "s", ("x",), [3, 4], [0, 0], [0.0, 0.0])], ["e"])
        )


def test_verl_layout() -> None:
    vb = to_verl_batch(ragged_batch(), pad_id=0)
    b = vb.batch
    assert b["prompts"].tolist() == [[1, 2, 3], [0, 5, 6]]  # left-padded
    assert b["responses"].tolist() == [[10, 11, 20, 12], [9, 0, 0, 0]]  # right-padded
    assert b["response_mask"].tolist() == [[1, 1, 0, 1], [1, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1] * 7, [0, 1, 1, 1, 0, 0, 0]]
    assert b["position_ids"][1].tolist()[:4] == [0, 0, 1, 2]
    assert b["input_ids"].shape == (2, 7)
    assert b["old_log_probs"][0].tolist() == pytest.approx([-0.1, -0.2, 0.0, -0.3])
    assert b["advantages"].tolist() == [[2.0, 2.0, 0.0, 2.0], [-1.0, 0.0, 0.0, 0.0]]
    assert list(vb.non_tensor_batch["uid"]) == ["ep", "ep2"]
    cfg = verl_config(
        TrainerSettings(loss_agg=LossAgg.SEQ_MEAN_TOKEN_SUM, kl_coef=0.01, clip_eps_high=0.28)
    )
    assert cfg["actor_rollout_ref.actor.loss_agg_mode"] == "seq-mean-token-sum"
    assert cfg["actor_rollout_ref.actor.use_kl_loss"] is True
    assert cfg["actor_rollout_ref.actor.clip_ratio_high"] == 0.28
    assert cfg["algorithm.adv_estimator"] == "grpo"


def test_verl_backend_refuses_without_gpu_or_verl() -> None:
    with pytest.raises(ConfigError, match=r"needs the verl package \(pip install verl==0\.9\.1"):
        make_backend(TrainerSettings(backend=BackendName.VERL))


def test_make_backend_gives_fireworks_a_detokenizer_from_the_tokenizer_setting(
    tiny_model: Path, tmp_path: Path
) -> None:
    """From the CLI there is no detokenizer to pass: the tokenizer setting names one."""
    from transformers import AutoTokenizer

    base = {
        "backend": BackendName.FIREWORKS,
        "model": "accounts/fireworks/models/x",
        "loss": LossKind.SFT,
        "fireworks_account": "acct",
        "fireworks_api_key": SecretStr("fw-test"),
        "fireworks_deployment": "accounts/acct/deployments/d1",
        "lora_rank": 8,
    }
    backend = make_backend(TrainerSettings(**base, tokenizer=str(tiny_model)))
    assert isinstance(backend, FireworksBackend)
    assert backend.deployment == "accounts/acct/deployments/d1"
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    ids = tok.encode("abc cab", add_special_tokens=False)
    assert len(ids) == 7
    assert backend.detokenize(ids) == "abc cab"
    with pytest.raises(ConfigError, match="no-such-dir"):
        make_backend(TrainerSettings(**base, tokenizer=str(tmp_path / "no-such-dir")))


def test_allocator_keeps_freed_memory_on_glibc() -> None:
    from rllm.models.memory import keep_freed_memory

    assert keep_freed_memory() is True  # this Linux machine runs glibc
    assert keep_freed_memory() is True  # once per process; a second call changes nothing


def test_engine_and_backend_compute_on_the_compute_thread(tiny_model: Path) -> None:
    """Generation and training run torch on the one compute thread, whichever thread
    calls them (OpenMP then keeps a single team of workers)."""
    import threading
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from rllm.models.loading import load_model
    from rllm.serving.engine import Engine, SamplingParams

    seen: set[str] = set()

    def record(*_: object) -> None:
        seen.add(threading.current_thread().name)

    loaded = load_model(str(tiny_model))
    loaded.model.register_forward_pre_hook(record)
    engine = Engine(loaded)
    with ThreadPoolExecutor(2) as pool:  # callers on two other threads
        outs = list(
            pool.map(
                lambda s: engine.generate([[1, 2, 3]], [SamplingParams(max_tokens=3, seed=s)]),
                range(2),
            )
        )
    assert [len(o[0].token_ids) for o in outs] == [3, 3]
    assert len(seen) == 1 and seen.pop().startswith("rllm-torch")
    settings = TrainerSettings(model=str(tiny_model), run_id=uuid.uuid4().hex, torch_threads="auto")
    backend = LocalBackend(settings)
    backend.compute.register_forward_pre_hook(record)
    result = backend.update(batch())
    assert result.version == 1 and result.metrics["threads"] >= 1
    assert len(seen) == 1 and seen.pop().startswith("rllm-torch")
