"""What ``uniform_reward=keep`` and ``max_updates`` mean (issue 35): a kept uniform group
is trained (the batch makes an update), and ``max_updates`` counts updates made, not
batches."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import rllm
from rllm.app import describe_drops
from rllm.app.report import UpdateRecord
from rllm.consumers.trainer.core import TrainerCore
from rllm.consumers.trainer.loop import TrainerReport
from rllm.consumers.trainer.settings import TrainerSettings, UniformPolicy
from rllm.consumers.trainer.types import TrainBatch, UpdateResult
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.types import Task
from tests.unit.app.factory import update_record
from tests.unit.consumers.trainer.factory import episode


class StepCounter:
    """A backend that counts its optimiser steps and the sequences each one saw."""

    name = "counter"
    base_model = "m"

    def __init__(self) -> None:
        self.version = 0
        self.advantages: list[list[float]] = []

    def update(self, batch: TrainBatch) -> UpdateResult:
        self.advantages.append([s.advantage for s in batch.sequences])
        self.version += 1
        return UpdateResult(version=self.version, metrics={})

    def save(self, directory: Path) -> str:
        return str(directory)

    def load(self, directory: Path, version: int) -> None:
        self.version = version


@pytest.mark.parametrize("policy", [UniformPolicy.KEEP, UniformPolicy.DROP])
def test_a_kept_uniform_group_makes_an_update(policy: UniformPolicy, tmp_path: Path) -> None:
    settings = TrainerSettings(uniform_reward=policy, batch_size=2, checkpoint_dir=tmp_path)
    backend = StepCounter()
    core = TrainerCore(settings, backend)  # type: ignore[arg-type]  # a counting fake
    added = [core.batcher.add(episode(f"u{i}", rewards=(0.0, 0.0)), 0) for i in range(2)]
    if policy is UniformPolicy.DROP:
        assert added == [False, False] and not core.batcher.ready()
        assert describe_drops(core.batcher.drops.as_metrics()) == "2 uniform episodes dropped"
        return
    assert added == [True, True] and core.batcher.ready()
    result, event = core.train_pending({})
    assert (result.version, core.version, event.version, event.num_episodes) == (1, 1, 1, 2)
    assert backend.advantages == [[0.0, 0.0, 0.0, 0.0]]  # zero GRPO advantage, still a step
    assert describe_drops(core.batcher.drops.as_metrics()) == "2 uniform episodes kept"


@rllm.rollout
def agent(task: Task, config: RolloutConfig) -> str:
    return "x"


def test_max_updates_counts_updates_made_not_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [Task(task_id=f"t{i}") for i in range(6)]
    config = {"batch_size": 1, "max_updates": 2, "mode": "async"}
    trainer = rllm.AgentTrainer(agent, train_dataset=tasks, config=config)
    assert trainer.planned_batches() == 6, "every epoch's batches: max_updates counts updates"
    fake = SimpleNamespace(version=0, failure=None, report=TrainerReport())
    running = SimpleNamespace(
        trainer=fake,
        settings=SimpleNamespace(run_estimator=lambda: None),
        raise_failure=lambda: None,
    )
    # batch 1 and 2 make no update (their groups dropped), 3 and 4 do; 5 is never run
    versions = iter([(0, 0), (0, 0), (0, 1), (1, 2), (2, 3)])
    batches: list[list[str]] = []

    def one_batch(run: Any, batch: list[Task]) -> UpdateRecord:
        batches.append([t.task_id for t in batch])
        rollout_version, fake.version = next(versions)
        return update_record(fake.version, rollout_version)

    monkeypatch.setattr(trainer, "_start", lambda progress=False: running)
    monkeypatch.setattr(trainer, "_one_batch", one_batch)
    monkeypatch.setattr(trainer, "close", lambda: None)
    report = trainer.train(progress=False)
    assert batches == [["t0"], ["t1"], ["t2"], ["t3"]]
    assert (len(report.updates), report.num_updates, report.version) == (4, 2, 2)
    assert str(report).splitlines()[0] == (
        f"run {trainer.config.run_id}: 4 batches, 2 updates, policy version 2"
    )
