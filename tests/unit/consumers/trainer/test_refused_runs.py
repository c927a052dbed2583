"""Runs that cannot train say so (issue 33 item 3.9): bad sampling is refused before the
first rollout, naming the value; a run whose every rollout failed, or whose trainer refused
every episode, ends with an error naming the first; ``clip_eps_low`` is bounded; the local
model server refuses ``logit_bias``, which it could neither apply nor record."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

import rllm
from rllm.app.report import TrainReport, UpdateRecord
from rllm.cli.main import cli
from rllm.consumers.trainer.loop import TrainerReport
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.errors import ConfigError, RllmError
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.sampling import sampling_problem
from rllm.schemas.types import Task
from rllm.serving.errors import RequestError
from rllm.serving.protocol import sampling_params
from tests.unit.app.factory import update_record


@rllm.rollout
def agent(task: Task, config: RolloutConfig) -> str:
    return "x"


@pytest.mark.parametrize(
    ("sampling", "problem"),
    [
        ({"temperature": -1.0}, "temperature=-1.0 must be a number in [0, 100]"),
        ({"top_p": 0}, "top_p=0 must be a number in (0, 1]"),
        ({"top_p": 1.5}, "top_p=1.5 must be a number in (0, 1]"),
        ({"max_tokens": 0}, "max_tokens=0 must be a positive integer"),
        ({"top_k": -2}, "top_k=-2 must be an integer, -1 or 0 for no limit"),
        ({"temperature": 0, "top_p": 1, "max_tokens": 1, "top_k": -1}, None),
    ],
)
def test_sampling_problems_name_the_field_and_value(
    sampling: dict[str, Any], problem: str | None
) -> None:
    assert sampling_problem(sampling) == problem
    if problem is not None:  # the local model server refuses the same values, in its words
        with pytest.raises(RequestError, match=problem.split("=")[0]):
            sampling_params(sampling, chat=True)


def test_bad_sampling_is_refused_before_any_rollout() -> None:
    trainer = rllm.AgentTrainer(
        agent, train_dataset=[Task(task_id="t")], config={"sampling": {"temperature": -1}}
    )
    with pytest.raises(ConfigError, match=r"sampling temperature=-1 must be a number in"):
        trainer.check()


def test_cli_train_refuses_a_negative_temperature_with_a_nonzero_exit() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--benchmark",
            "multiply",
            "--temperature",
            "-1",
            "--gateway-url",
            "http://127.0.0.1:1",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "temperature=-1.0 must be a number in [0, 100]" in result.stderr


def test_clip_eps_low_is_bounded_by_flag_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert TrainerSettings(clip_eps_low=0.99).clip_eps_low == 0.99
    with pytest.raises(ValidationError, match="clip_eps_low"):
        TrainerSettings(clip_eps_low=1.0)
    monkeypatch.setenv("RLLM_CLIP_EPS_LOW", "5")
    with pytest.raises(ValidationError, match="clip_eps_low"):
        TrainerSettings()
    monkeypatch.delenv("RLLM_CLIP_EPS_LOW")
    result = CliRunner().invoke(cli, ["train", "consume", "--clip-eps-low", "5"])
    assert result.exit_code == 2, result.output
    assert "--clip-eps-low: Input should be less than 1 (got 5.0)" in result.stderr


def test_the_local_server_refuses_logit_bias() -> None:
    with pytest.raises(RequestError, match=r"logit_bias=\{'50256': -100\} is not supported"):
        sampling_params({"logit_bias": {"50256": -100}}, chat=True)
    assert sampling_params({"logit_bias": {}}, chat=True).temperature == 1.0  # asks nothing


def _record(failed: int, first_error: str | None = None) -> UpdateRecord:
    return update_record(rollouts=4, failed=failed, first_error=first_error)


def test_a_run_fails_only_when_every_rollout_failed() -> None:
    bad = "BadRequestError: 400 temperature=-1 must be a number"
    all_failed = TrainReport("r", updates=[_record(4, bad), _record(4, "other")])
    assert all_failed.failure() == f"every one of its 8 rollouts failed; the first: {bad}"
    assert TrainReport("r", updates=[_record(4, bad), _record(3, "x")]).failure() is None
    assert TrainReport("r").failure() is None


def test_a_trainer_that_refused_every_episode_fails_naming_the_first() -> None:
    why = "refused episode ep:r/t for training: session s has tokens=missing"
    report = TrainerReport(
        episodes_consumed=3,
        other_runs=1,
        messages=[why, "later"],
        drops={"refused_missing_tokens_episodes": 2.0},
    )
    assert (
        report.all_refused() == f"every one of the 2 episodes it read was refused; the first: {why}"
    )
    uniform = TrainerReport(episodes_consumed=2, drops={"dropped_uniform_episodes": 2.0})
    assert uniform.all_refused() is None, "uniform groups dropped are not refusals"
    trained = TrainerReport(updates=1, episodes_consumed=2, drops=report.drops)
    assert trained.all_refused() is None


def test_train_raises_after_a_run_whose_every_rollout_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trainer = rllm.AgentTrainer(agent, train_dataset=[Task(task_id="t")], config={"mode": "async"})
    fake = SimpleNamespace(version=0, failure=None, report=TrainerReport(episodes_consumed=0))
    running = SimpleNamespace(
        trainer=fake,
        settings=SimpleNamespace(run_estimator=lambda: None),
        raise_failure=lambda: None,
    )
    monkeypatch.setattr(trainer, "_start", lambda progress=False: running)
    monkeypatch.setattr(trainer, "_one_batch", lambda run, batch: _record(4, "Boom: 400"))
    monkeypatch.setattr(trainer, "close", lambda: None)
    with pytest.raises(
        RllmError, match=r"every one of its 4 rollouts failed; the first: Boom: 400"
    ):
        trainer.train(progress=False)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--lr", "-1", "--lr: Input should be greater than 0 (got -1.0)"),
        ("--group-size", "0", "--group-size: Input should be greater than or equal to 1 (got 0)"),
        ("--clip-eps-low", "5", "--clip-eps-low: Input should be less than 1 (got 5.0)"),
    ],
)
def test_cli_train_refuses_a_bad_flag_by_its_name_before_printing(
    flag: str, value: str, message: str
) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--benchmark",
            "multiply",
            flag,
            value,
            "--gateway-url",
            "http://127.0.0.1:1",
            "-b",
            "127.0.0.1:1",
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no "training on multiply ..." line before the refusal
    assert result.stderr.strip() == f"error: invalid settings: {message}"


def test_a_bad_setting_from_the_environment_keeps_its_field_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RLLM_LR", "-1")
    result = CliRunner().invoke(
        cli, ["train", "--benchmark", "multiply", "--gateway-url", "http://127.0.0.1:1"]
    )
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert (
        result.stderr.strip()
        == "error: invalid settings: lr: Input should be greater than 0 (got '-1')"
    )


def test_train_config_holds_typed_trainer_overrides() -> None:
    from rllm.app.config import train_config
    from rllm.consumers.trainer.types import LossKind

    config = train_config({"trainer": {"loss": "sft", "lr": "0.5"}})
    assert (config.trainer.loss, config.trainer.lr) == (LossKind.SFT, 0.5)  # type: ignore[attr-defined]  # fields made from TrainerSettings
    assert config.trainer.model_dump(exclude_unset=True) == {"loss": LossKind.SFT, "lr": 0.5}
    with pytest.raises(
        ConfigError, match=r"TrainConfig.trainer.lrr: Extra inputs are not permitted, got 1"
    ):
        train_config({"trainer": {"lrr": 1}})
    with pytest.raises(
        ConfigError, match=r"TrainConfig.trainer.clip_eps_low: Input should be less than 1, got 5"
    ):
        train_config({"trainer": {"clip_eps_low": 5}})
