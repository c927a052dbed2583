"""Defaults of the main job on the local model: eval's budget and concurrency, and the
model server's environment in ``rllm-cli up``'s plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.cli.eval import is_local_model
from rllm.cli.stack import stack_settings
from rllm.infra.stack import plan_services
from rllm.models.profiles import ModelProfile, Provider, UserConfig, save_config


@pytest.fixture(autouse=True)
def _config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLLM_CONFIG_DIR", str(tmp_path / "config"))
    for var in ("RLLM_SERVE_TORCH_THREADS", "RLLM_BATCH_WAIT_MS", "RLLM_MODEL"):
        monkeypatch.delenv(var, raising=False)


def _save(active: str, **profiles: Provider) -> None:
    save_config(
        UserConfig(
            active=active,
            profiles={
                name: ModelProfile(
                    name=name, provider=p, model=f"{name}-model", base_url="http://h:1/v1"
                )
                for name, p in profiles.items()
            },
        )
    )


def test_is_local_model_follows_profiles() -> None:
    assert is_local_model(None) and is_local_model("local")
    assert not is_local_model("gpt-4o-mini")
    _save("remote", remote=Provider.VLLM, mine=Provider.LOCAL)
    assert not is_local_model(None)
    assert is_local_model("mine") and not is_local_model("remote")


def test_serve_gets_the_default_model_measured_threads_and_a_batch_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setenv("RLLM_MODEL", "local")  # the stack's profile name, not a model path
    monkeypatch.setenv("RLLM_SERVE_PORT", "18123")  # the server's own setting, passed on
    specs = plan_services(stack_settings(home=tmp_path))
    assert [s.name for s in specs] == ["serve", "gateway", "processors", "history", "view"]
    serve = specs[0]
    assert serve.args == (
        "serve",
        "--port",
        "18123",
        "--served-model-name",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    )
    assert serve.env["RLLM_MODEL"] == ""
    threads = serve.env["RLLM_SERVE_TORCH_THREADS"]
    assert (threads, serve.env["RLLM_BATCH_WAIT_MS"]) == ("auto", "500")
    assert serve.health_url == "http://127.0.0.1:18123/health"
    monkeypatch.setenv("RLLM_SERVE_TORCH_THREADS", "3")
    assert plan_services(stack_settings(home=tmp_path))[0].env["RLLM_SERVE_TORCH_THREADS"] == "3"
