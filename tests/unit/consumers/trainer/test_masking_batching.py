"""Masks, multi-step merging, staleness, uniform groups and tokens=missing refusal."""

from __future__ import annotations

import pytest

from rllm.consumers.trainer.batching import Batcher, episode_sequences
from rllm.consumers.trainer.errors import MissingTokensError
from rllm.consumers.trainer.masking import trajectory_sequences
from rllm.consumers.trainer.settings import SyncMode, TrainerSettings, UniformPolicy
from rllm.consumers.trainer.types import LossKind
from tests.unit.consumers.trainer.factory import episode, step, trajectory


def test_only_sampled_tokens_carry_loss_and_tool_output_is_masked() -> None:
    s0 = step("a/0", [1, 2, 3], [10, 11], logprobs=[-0.1, -0.2], index=0)
    # step 1 extends step 0: prompt = step0 prompt + response + tool output [20, 21]
    s1 = step("a/1", [1, 2, 3, 10, 11, 20, 21], [12], logprobs=[-0.3], index=1)
    traj = trajectory("a", [s0, s1], 1.0)
    (seq,) = trajectory_sequences(traj, "ep", advantage=0.5, merge_steps=True)
    assert seq.input_ids_T == [1, 2, 3, 10, 11, 20, 21, 12]
    assert seq.loss_mask_T == [0, 0, 0, 1, 1, 0, 0, 1]
    assert seq.logprobs_T == pytest.approx([0, 0, 0, -0.1, -0.2, 0, 0, -0.3])
    assert seq.step_ids == ("a/0", "a/1")
    assert seq.num_loss_tokens == 3


def test_steps_not_extending_or_unmerged_become_own_sequences() -> None:
    s0 = step("b/0", [1, 2, 3], [10, 11], index=0)
    s1 = step("b/1", [1, 2, 99], [12], index=1)  # does not extend step 0
    seqs = trajectory_sequences(trajectory("b", [s0, s1], 1.0), "ep", 1.0)
    assert [q.input_ids_T for q in seqs] == [[1, 2, 3, 10, 11], [1, 2, 99, 12]]
    assert [q.loss_mask_T for q in seqs] == [[0, 0, 0, 1, 1], [0, 0, 0, 1]]
    s2 = step("b/2", [1, 2, 3, 10, 11, 5], [13], index=2)
    seqs = trajectory_sequences(trajectory("b", [s0, s2], 1.0), "ep", 1.0, merge_steps=False)
    assert len(seqs) == 2 and seqs[1].loss_mask_T == [0, 0, 0, 0, 0, 0, 1]


def test_advantages_per_loss() -> None:
    ep = episode("e1", rewards=(1.0, 0.0))
    assert [q.advantage for q in episode_sequences(ep, LossKind.GRPO)] == [0.5, -0.5]
    # every loss trains on the processors' advantages; for reinforce the raw reward
    ep = episode("e1", rewards=(1.0, 0.0), estimator="reinforce", advantages=(1.0, 0.0))
    assert [q.advantage for q in episode_sequences(ep, LossKind.REINFORCE)] == [1.0, 0.0]


def test_missing_tokens_refused_naming_the_session_and_counted() -> None:
    ep = episode("e-miss", missing=True)
    with pytest.raises(MissingTokensError, match=r"session e-miss/s1 .*tokens=missing"):
        episode_sequences(ep, LossKind.GRPO)
    b = Batcher(TrainerSettings(batch_size=1))
    assert not b.add(ep, current_version=0)
    assert b.drops.missing_tokens_episodes == 1
    assert "e-miss/s1" in b.drops.messages[-1]
    assert b.pending == 0
    assert b.add(episode("e-ok"), 0) and b.ready()


def test_staleness_limit_drops_and_reports() -> None:
    settings = TrainerSettings(batch_size=10, mode=SyncMode.ASYNC, max_staleness=2)
    b = Batcher(settings)
    assert b.add(episode("fresh", version=5), current_version=5)
    assert b.add(episode("old-ok", version=3), current_version=5)  # staleness 2
    assert not b.add(episode("too-old", version=2), current_version=5)  # staleness 3
    assert b.drops.stale_episodes == 1 and b.drops.stale_steps == 2
    assert "too-old" in b.drops.messages[-1] and "limit 2" in b.drops.messages[-1]
    sync = Batcher(TrainerSettings(mode=SyncMode.SYNC, max_staleness=5))
    assert not sync.add(episode("one-behind", version=4), current_version=5)
    assert sync.drops.stale_episodes == 1
    batch = b.take()
    assert batch.episode_ids == ["fresh", "old-ok"] and b.pending == 0


def test_uniform_groups_dropped_or_flagged() -> None:
    drop = Batcher(TrainerSettings(uniform_reward=UniformPolicy.DROP))
    assert not drop.add(episode("u", rewards=(1.0, 1.0)), 0)
    assert drop.drops.uniform_episodes == 1
    keep = Batcher(TrainerSettings(uniform_reward=UniformPolicy.KEEP))
    assert keep.add(episode("u", rewards=(1.0, 1.0)), 0)
    assert keep.drops.uniform_kept == 1
    sft = Batcher(TrainerSettings(loss=LossKind.SFT))  # SFT needs no reward signal
    assert sft.add(episode("u", rewards=(1.0, 1.0)), 0)


def test_a_redelivered_episode_is_trained_once() -> None:
    b = Batcher(TrainerSettings(uniform_reward=UniformPolicy.KEEP), seen=["done-before"])
    assert b.add(episode("e1"), 0)
    assert not b.add(episode("e1"), 0)  # the processors' at-least-once copy
    assert not b.add(episode("done-before"), 0)  # trained before the last checkpoint
    assert b.drops.duplicate_episodes == 2
    assert b.take().episode_ids == ["e1"]
    assert not b.add(episode("e1"), 0), "still a duplicate after its batch was taken"
    assert b.drops.as_metrics()["skipped_duplicate_episodes"] == 3.0


def test_trainer_settings_name_the_runs_to_train_on() -> None:
    assert TrainerSettings().episode_run_ids == ()
    assert TrainerSettings(episode_run_ids=("a", "b")).episode_run_ids == ("a", "b")
