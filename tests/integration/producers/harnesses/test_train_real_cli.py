"""Training through a third-party CLI agent, mechanically: ``rllm-cli train --agent codex``
runs the real Codex CLI (npm) in local sandboxes against a real gateway in front of the
scripted model, a real processors worker assembles its runs, the local backend updates a
tiny model and the gateway adopts the version. Learning is not asked of a tiny model; what
is checked is that the loop is sound: every model call captured as a step, one trajectory
per rollout, only sampled tokens carrying loss, one update, the next rollouts on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.consumers.trainer.masking import trajectory_sequences
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.schemas.types import EpisodeAssembled
from rllm.settings import KafkaSettings
from tests.fakes.scripted import ScriptedUpstream
from tests.integration.producers.harnesses.helpers import needs_local_sandbox
from tests.integration.producers.harnesses.scripts import CODEX_SOLVE
from tests.integration.producers.harnesses.training import TrainOnTasks, run_records, tiny_model

RUN = "codex-train"

pytestmark = needs_local_sandbox


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_training_through_the_codex_cli_captures_masks_updates_and_adopts(
    kafka: KafkaSettings, train_on_tasks: TrainOnTasks, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    upstream.script[:] = CODEX_SOLVE  # its shell tool writes the file, then a final message
    tasks = train_on_tasks.tasks("hello-file")
    # one attention head: Codex's prompt is ~20k tokens, and CPU attention holds length
    # squared per head while it trains
    model = tiny_model(tmp_path / "model", heads=1, hidden=16, positions=65536)
    result = train_on_tasks(tasks, "codex", RUN, model)
    assert result.exit_code == 0, result.output
    assert "training on tasks with harness codex: 1 tasks x 2 rollouts" in result.stdout
    assert "rollouts of v0: reward 1.000 (100% correct) -> v1; " in result.stdout
    assert "rollouts of v1: reward 1.000 (100% correct) -> v2; " in result.stdout

    ours = run_records(kafka, EPISODES, EpisodeAssembled, RUN)
    assert sorted(e.task.task_id for e in ours) == ["hello-file", "hello-file@e2"]
    for episode, version in zip(sorted(ours, key=lambda e: e.task.task_id), (0, 1), strict=True):
        # one trajectory per rollout, each of Codex's two model calls (the tool call that
        # writes the file, then the final message), rewarded by the task's verifier
        assert [t.reward for t in episode.trajectories] == [1.0, 1.0]
        assert [len(t.steps) for t in episode.trajectories] == [2, 2]
        assert {s.policy_version for t in episode.trajectories for s in t.steps} == {version}
        for trajectory in episode.trajectories:
            sampled = [s.response_ids.tolist() for s in trajectory.steps]
            sequences = trajectory_sequences(trajectory, episode.event_id, 1.0)
            assert len(sequences) == 1  # the second call's prompt extends the first: merged
            # loss only on what the model sampled, in order; Codex's instructions, the
            # tool's output and the second prompt are all masked
            carried = [
                token
                for seq in sequences
                for token, mask in zip(seq.input_ids_T, seq.loss_mask_T, strict=True)
                if mask
            ]
            assert carried == [t for response in sampled for t in response]
            prompt_tokens = sum(len(s.input_ids_T) for s in sequences) - len(carried)
            assert prompt_tokens > 1000  # Codex's own system prompt and tools, masked
            print(
                f"codex trajectory: {len(sequences)} sequences, {prompt_tokens} masked "
                f"tokens, {len(carried)} sampled"
            )
    versions = [u.version for u in run_records(kafka, POLICY_UPDATES, PolicyUpdated, RUN)]
    assert versions == [0, 1, 2]
    served = [u.version for u in run_records(kafka, POLICY_UPDATES, PolicyServed, RUN)]
    assert served[:3] == [0, 1, 2]
    assert len(upstream.requests) == 8  # 2 epochs x 2 rollouts x 2 calls
