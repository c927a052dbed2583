"""The model server loads only checkpoints of the model it serves: a foreign or partial
checkpoint is refused before any weight is copied, and the served version stays."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.serving.engine import Engine, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=6)


def _save(state: dict[str, torch.Tensor], directory: Path) -> str:
    directory.mkdir(parents=True)
    save_file(
        {k: v.detach().clone().contiguous() for k, v in state.items()},
        str(directory / "model.safetensors"),
    )
    return directory.as_uri()


def _logprobs(engine: Engine) -> list[float]:
    (out,) = engine.generate([[5, 6, 7]], [GREEDY])
    return out.logprobs


def test_a_checkpoint_of_another_model_is_refused_and_the_served_policy_stays(
    tiny_model: Path, tmp_path: Path
) -> None:
    engine = Engine(load_model(str(tiny_model)))
    before = _logprobs(engine)
    other = load_model(str(tiny_model_dir(tmp_path / "other", seed=1, hidden=16)))
    uri = _save(other.model.state_dict(), tmp_path / "ckpt")
    with pytest.raises(ValueError, match=r"not a checkpoint of the served model \(.*reshaped"):
        engine.load_checkpoint(uri, 36, "perf-run")
    assert (engine.version, engine.policy_run) == (0, "")
    assert _logprobs(engine) == before, "no weight was copied"


def test_a_checkpoint_whose_names_match_nothing_is_refused(
    tiny_model: Path, tmp_path: Path
) -> None:
    """With ``strict=False`` alone this 'loaded': no weight matched, the base weights stayed
    and the server reported version 36."""
    engine = Engine(load_model(str(tiny_model)))
    before = _logprobs(engine)
    renamed = {f"base_model.{k}": v for k, v in engine.model.state_dict().items()}
    uri = _save(renamed, tmp_path / "adapter")
    with pytest.raises(
        ValueError, match=r"missing model\.embed_tokens\.weight.*unknown base_model"
    ):
        engine.load_checkpoint(uri, 36, "perf-run")
    assert (engine.version, engine.policy_run) == (0, "")
    assert _logprobs(engine) == before


def test_a_save_pretrained_checkpoint_with_tied_embeddings_loads(
    tiny_model: Path, tmp_path: Path
) -> None:
    engine = Engine(load_model(str(tiny_model)))
    before = _logprobs(engine)
    trained = load_model(str(tiny_model))
    with torch.no_grad():
        for p in trained.model.parameters():
            p.mul_(1.5)
    trained.model.save_pretrained(tmp_path / "v1")
    assert "lm_head.weight" not in load_file(str(tmp_path / "v1" / "model.safetensors")), (
        "the tied head is written once"
    )
    engine.load_checkpoint((tmp_path / "v1").as_uri(), 1, "run")
    assert (engine.version, engine.policy_run) == (1, "run")
    assert _logprobs(engine) != before
