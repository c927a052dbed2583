"""AgentTrainer's configuration, checked before any rollout."""

from __future__ import annotations

import pytest

import rllm
from rllm.errors import ConfigError
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.run import run_estimator
from rllm.schemas.types import Task
from tests.unit.producers.sdk.agents import counting_agent


@rllm.rollout
def agent(task: Task, config: RolloutConfig) -> str:
    return "x"


def test_sync_driver_lets_the_trainer_take_batches_one_version_behind() -> None:
    trainer = rllm.AgentTrainer(
        agent,
        train_dataset=[Task(task_id="t")],
        config={
            "mode": "sync",
            "batch_size": 3,
            "run_id": "r",
            "trainer": {"max_staleness": 5, "lr": 1e-4},
        },
    )
    settings = trainer.trainer_settings()
    assert settings.mode.value == "async" and settings.max_staleness == 1
    assert (settings.batch_size, settings.run_id, settings.lr) == (3, "r", 1e-4)
    assert settings.episode_run_ids == ("r",), "only this run's episodes are trained"
    loose = rllm.AgentTrainer(
        agent,
        train_dataset=[Task(task_id="t")],
        config={"mode": "async", "trainer": {"max_staleness": 3}},
    )
    assert loose.trainer_settings().max_staleness == 3


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="mode must be sync or async, got 'later'"):
        rllm.AgentTrainer(agent, config={"mode": "later"})
    with pytest.raises(ConfigError, match=r"train_dataset\[1\] is a dict"):
        rllm.AgentTrainer(agent, train_dataset=[Task(task_id="t"), {"task_id": "u"}])
    with pytest.raises(ConfigError, match=r"must be an @rllm\.rollout function"):
        rllm.AgentTrainer(lambda t, c: "x")  # type: ignore[arg-type]  # a plain function on purpose: it is refused
    with pytest.raises(ConfigError, match=r"train\(\) needs a train_dataset"):
        rllm.AgentTrainer(agent).train()


def test_the_mode_is_a_sync_mode_and_a_bad_field_is_a_config_error_naming_it() -> None:
    from rllm.app import TrainConfig
    from rllm.consumers.trainer.settings import SyncMode

    assert rllm.AgentTrainer(agent, config={"mode": "async"}).config.mode is SyncMode.ASYNC
    assert TrainConfig().mode is SyncMode.SYNC
    assert TrainConfig(mode=SyncMode.ASYNC).mode == "async"
    with pytest.raises(
        ConfigError, match=r"^TrainConfig\.group_size: .*greater than or equal to 1, got 0$"
    ):
        rllm.AgentTrainer(agent, config={"group_size": 0})
    with pytest.raises(
        ConfigError, match=r"^TrainConfig\.epoch: Extra inputs are not permitted, got 2$"
    ):
        rllm.AgentTrainer(agent, config={"epoch": 2})


def test_sampling_a_backend_cannot_score_is_refused_before_any_rollout() -> None:
    from rllm.consumers.trainer.errors import CapabilityError

    calls: list[str] = []
    counted = counting_agent(calls)
    hot = rllm.AgentTrainer(
        counted,
        train_dataset=[Task(task_id="t")],
        config={
            "sampling": {"temperature": 0.7, "top_p": 0.8},
            "trainer": {"backend": "tinker", "lora_rank": 8},
        },
    )
    with pytest.raises(
        CapabilityError, match=r"backend 'tinker' .* with temperature=0\.7, top_p=0\.8"
    ):
        hot.train()
    assert calls == []


@pytest.mark.parametrize(
    ("trainer", "estimator"),
    [
        ({}, "grpo"),
        ({"loss": "rloo"}, "rloo"),
        ({"estimator": "reinforce_plus_plus"}, "reinforce_plus_plus"),
        ({"loss": "reinforce"}, "reinforce"),
    ],
)
def test_every_task_of_every_epoch_names_the_runs_estimator(
    trainer: dict[str, str], estimator: str
) -> None:
    """The processors compute what the task names, so ``--loss rloo`` gets rloo
    advantages from a processors deployment set to grpo (issue 18, defect 2)."""
    run = rllm.AgentTrainer(
        agent,
        train_dataset=[Task(task_id="t", metadata_json='{"topic": "x"}'), Task(task_id="u")],
        config={"batch_size": 1, "epochs": 2, "trainer": trainer},
    )
    # what train() does: the batches of the run's estimator, as its settings name it
    batches = list(run._batches(run.trainer_settings().run_estimator()))
    tasks = [t for batch in batches for t in batch]
    assert [t.task_id for t in tasks] == ["t", "u", "t@e2", "u@e2"]
    assert [run_estimator(t.metadata_json) for t in tasks] == [estimator] * 4
    assert tasks[0].metadata["topic"] == "x", "the task's own metadata is kept"


def test_sft_runs_name_no_estimator() -> None:
    run = rllm.AgentTrainer(
        agent, train_dataset=[Task(task_id="t")], config={"trainer": {"loss": "sft"}}
    )
    assert run.trainer_settings().run_estimator() is None
    (batch,) = run._batches(run.trainer_settings().run_estimator())
    assert [run_estimator(t.metadata_json) for t in batch] == [None]


def test_epoch_batches_renames_later_epochs_and_carry_the_estimator() -> None:
    from rllm.app.rollouts import epoch_batches

    tasks = [Task(task_id=f"t{i}") for i in range(3)]
    batches = list(epoch_batches(tasks, batch_size=2, epochs=2, estimator="rloo"))
    assert [[t.task_id for t in b] for b in batches] == [
        ["t0", "t1"],
        ["t2"],
        ["t0@e2", "t1@e2"],
        ["t2@e2"],
    ]
    assert {run_estimator(t.metadata_json) for b in batches for t in b} == {"rloo"}
    plain = list(epoch_batches(tasks, batch_size=3, epochs=1))
    assert plain == [tasks], "no estimator: the tasks as given"
