"""``rllm-cli train --tasks-dir DIR --agent bash`` through click: groups of harness rollouts
per task (real local sandboxes, a real gateway in front of the scripted model), episodes from
a real processors worker, updates by the local backend on a tiny model, on the real broker."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rllm.cli.main import cli
from rllm.sandboxes import SandboxSettings
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.schemas.types import EpisodeAssembled
from rllm.settings import KafkaSettings
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import read_all
from tests.integration.processors.helpers import Workers
from tests.integration.producers.harnesses.helpers import needs_local_sandbox
from tests.paths import HARBOR_TASKS as TASKS

RUN = "harness-train"

pytestmark = needs_local_sandbox


def _model(directory: Path, heads: int = 4, hidden: int = 32, positions: int = 8192) -> Path:
    """The tiny test model, widened to the scripted model's token ids (bytes + 3) and to
    the harness's prompts."""
    import transformers

    from rllm.models.tiny import tiny_model_dir

    tf: Any = transformers  # untyped
    tiny_model_dir(directory)
    config = tf.LlamaConfig(
        vocab_size=320,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=heads,
        num_key_value_heads=min(2, heads),
        max_position_embeddings=positions,
        eos_token_id=1,
        pad_token_id=0,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    tf.LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def train_on_tasks(
    kafka: KafkaSettings,
    gateway: ThreadedServer,
    sandbox_settings: SandboxSettings,
    tmp_path: Path,
    tasks: Path,
    agent: str,
    run_id: str,
    model: Path,
) -> Result:
    """``rllm-cli train --tasks-dir TASKS --agent AGENT`` (groups of 2, a task per batch, 2
    epochs) with a processors worker running beside it."""
    workers = Workers(kafka, tmp_path)
    workers.start()
    env = {"RLLM_SANDBOX_HOME": str(sandbox_settings.home), "RLLM_SANDBOX_BACKEND": "local"}
    try:
        return CliRunner().invoke(
            cli,
            [
                "train",
                "--tasks-dir",
                str(tasks),
                "--agent",
                agent,
                "--group-size",
                "2",
                "--batch-size",
                "1",
                "--epochs",
                "2",
                "--uniform-reward",
                "keep",
                "--model",
                str(model),
                "--served-model",
                "scripted",
                "--lr",
                "0.01",
                "--checkpoint-dir",
                str(tmp_path / "ckpt"),
                "--run-id",
                run_id,
                "--gateway-url",
                gateway.url,
                "-b",
                kafka.bootstrap_servers,
                "--topic-prefix",
                kafka.topic_prefix,
            ],
            env=env,
            catch_exceptions=False,
        )
    finally:
        workers.close()


@pytest.mark.timeout(600)
def test_train_on_a_tasks_dir_runs_groups_of_harness_rollouts_into_updates(
    kafka: KafkaSettings,
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    sandbox_settings: SandboxSettings,
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "tasks"
    for name in ("hello-file", "three-files"):
        shutil.copytree(TASKS / name, tasks / name)
    shutil.copytree(TASKS / "hello-file", tasks / "no-toml")
    (tasks / "no-toml" / "task.toml").unlink()
    gateway = start_gateway(follow_policy_updates=True)
    model = _model(tmp_path / "model")
    result = train_on_tasks(kafka, gateway, sandbox_settings, tmp_path, tasks, "bash", RUN, model)
    assert result.exit_code == 0, result.output
    assert "error task no-toml left out: " in result.stderr and "task.toml" in result.stderr
    assert "training on tasks with harness bash: 2 tasks x 2 rollouts" in result.stdout
    assert "policy version 4" in result.stdout
    # each batch is one task: hello-file (solved) or three-files (not), epoch after epoch
    assert "rollouts of v0: reward 1.000 (100% correct) -> v1; " in result.stdout
    assert "rollouts of v3: reward 0.000 (0% correct) -> v4; " in result.stdout

    codec = AvroCodec()
    episodes = [codec.decode(m.value() or b"") for m in read_all(kafka, kafka.topic(EPISODES))]
    ours = {
        e.task.task_id: e for e in episodes if isinstance(e, EpisodeAssembled) and e.run_id == RUN
    }
    assert sorted(ours) == ["hello-file", "hello-file@e2", "three-files", "three-files@e2"]
    for name, episode in ours.items():
        # the script writes hello.txt then says done: hello-file solved, three-files not
        solved = 1.0 if name.startswith("hello-file") else 0.0
        assert [t.reward for t in episode.trajectories] == [solved, solved], name
        # one harness run = one trajectory of its model calls (command, then done)
        assert [len(t.steps) for t in episode.trajectories] == [2, 2], name
    updates = [codec.decode(m.value() or b"") for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
    versions = [u.version for u in updates if isinstance(u, PolicyUpdated) and u.run_id == RUN]
    assert versions == [0, 1, 2, 3, 4]
    assert len(upstream.requests) == 16  # 2 epochs x 2 tasks x 2 rollouts x 2 calls
    state = json.loads((tmp_path / "ckpt" / RUN / "v000004" / "state.json").read_text())
    trained = sorted(i for h in state["history"] for i in h["episode_ids"])
    assert trained == sorted(f"ep:{RUN}/{name}" for name in ours)  # each group trained once
