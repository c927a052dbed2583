"""``rllm-cli train --tasks-dir DIR --agent bash`` through click: groups of harness rollouts
per task (real local sandboxes, a real gateway in front of the scripted model), episodes from
a real processors worker, updates by the local backend on a tiny model, on the real broker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.schemas.types import EpisodeAssembled
from rllm.settings import KafkaSettings
from tests.fakes.scripted import ScriptedUpstream
from tests.integration.producers.harnesses.helpers import needs_local_sandbox
from tests.integration.producers.harnesses.training import TrainOnTasks, run_records, tiny_model
from tests.paths import HARBOR_TASKS as TASKS

RUN = "harness-train"

pytestmark = needs_local_sandbox


@pytest.mark.timeout(600)
def test_train_on_a_tasks_dir_runs_groups_of_harness_rollouts_into_updates(
    kafka: KafkaSettings, train_on_tasks: TrainOnTasks, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    tasks = train_on_tasks.tasks("hello-file", "three-files")
    shutil.copytree(TASKS / "hello-file", tasks / "no-toml")
    (tasks / "no-toml" / "task.toml").unlink()
    model = tiny_model(tmp_path / "model")
    result = train_on_tasks(tasks, "bash", RUN, model)
    assert result.exit_code == 0, result.output
    assert "error task no-toml left out: " in result.stderr and "task.toml" in result.stderr
    assert "training on tasks with harness bash: 2 tasks x 2 rollouts" in result.stdout
    assert "policy version 4" in result.stdout
    # each batch is one task: hello-file (solved) or three-files (not), epoch after epoch
    assert "rollouts of v0: reward 1.000 (100% correct) -> v1; " in result.stdout
    assert "rollouts of v3: reward 0.000 (0% correct) -> v4; " in result.stdout

    ours = {e.task.task_id: e for e in run_records(kafka, EPISODES, EpisodeAssembled, RUN)}
    assert sorted(ours) == ["hello-file", "hello-file@e2", "three-files", "three-files@e2"]
    for name, episode in ours.items():
        # the script writes hello.txt then says done: hello-file solved, three-files not
        solved = 1.0 if name.startswith("hello-file") else 0.0
        assert [t.reward for t in episode.trajectories] == [solved, solved], name
        # one harness run = one trajectory of its model calls (command, then done)
        assert [len(t.steps) for t in episode.trajectories] == [2, 2], name
    versions = [u.version for u in run_records(kafka, POLICY_UPDATES, PolicyUpdated, RUN)]
    assert versions == [0, 1, 2, 3, 4]
    assert len(upstream.requests) == 16  # 2 epochs x 2 tasks x 2 rollouts x 2 calls
    state = json.loads((tmp_path / "ckpt" / RUN / "v000004" / "state.json").read_text())
    trained = sorted(i for h in state["history"] for i in h["episode_ids"])
    assert trained == sorted(f"ep:{RUN}/{name}" for name in ours)  # each group trained once
