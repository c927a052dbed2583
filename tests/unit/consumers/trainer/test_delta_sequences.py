"""The trainer on delta-carried episodes (as rllm.episodes carries them) builds exactly the
sequences it builds from the same episodes with every prompt restored."""

from __future__ import annotations

import json
import random

import pytest

from rllm.consumers.trainer.batching import Batcher, episode_sequences
from rllm.consumers.trainer.errors import MissingTokensError
from rllm.consumers.trainer.masking import trajectory_sequences
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossKind
from rllm.processors.assemble import assemble_trajectory
from rllm.processors.group import build_episode
from rllm.processors.settings import ProcessorSettings
from rllm.schemas import types as t
from rllm.schemas.convert import to_avro
from rllm.schemas.delta import encode_step_dicts, restore_steps
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from tests.unit.processors.factory import task
from tests.unit.processors.long_session import CliSession


def _full(traj: t.TrajectoryAssembled) -> t.TrajectoryAssembled:
    """The full-prompt construction: every step restored."""
    steps, flags = restore_steps(traj.steps)
    assert flags == []
    return traj.model_copy(update={"steps": tuple(steps)})


def _group(n: int = 4, steps: int = 30) -> list[CliSession]:
    return [
        CliSession(
            f"g{r}",
            task("t"),
            rollout_index=r,
            group_size=n,
            steps=steps,
            context=9_000,
            system_tokens=3_000,
            answer="56" if r % 2 else "no",
            seed=r,
        )
        for r in range(n)
    ]


def test_a_delta_carried_episode_trains_as_its_full_prompt_construction() -> None:
    sessions = _group()
    trajs = [
        assemble_trajectory(list(s.events()), restore=False).model_copy(
            update={"reward": float(r % 2)}
        )
        for r, s in enumerate(sessions)
    ]
    assert all(s.prompt_prefix_len > 0 for tr in trajs for s in tr.steps[1:])
    delta = build_episode("run-1", task("t"), trajs, 4, ProcessorSettings())
    full = delta.model_copy(update={"trajectories": tuple(_full(tr) for tr in trajs)})
    for merge in (True, False):
        want = episode_sequences(full, LossKind.GRPO, merge)
        assert episode_sequences(delta, LossKind.GRPO, merge) == want
        assert len(want) == (4 if merge else 4 * 30)
    batches = []
    for episode in (delta, full):
        b = Batcher(TrainerSettings(batch_size=1))
        assert b.add(episode, current_version=0)
        batches.append(b.take())
    assert batches[0] == batches[1]
    for seq, session in zip(batches[0].sequences, sessions, strict=True):  # and by hand
        ref = session.reference()
        assert (seq.input_ids_T, seq.loss_mask_T, seq.logprobs_T) == (
            ref.input_ids_T,
            ref.loss_mask_T,
            ref.logprobs_T,
        )


def _awkward(rng: random.Random, sid: str) -> list[t.StepCaptured]:
    """Full-prompt steps: prompts that extend, restart or re-render a prefix, failed and
    empty steps, a change of temperature (which ends a merged sequence)."""
    steps, prev, parent = [], None, None
    for k in range(rng.randint(1, 10)):
        kind = rng.random()
        if prev is None or kind < 0.15:
            prompt = [rng.randint(0, 50) for _ in range(rng.randint(1, 6))]
        elif kind < 0.3:
            prompt = [*prev[: rng.randint(0, len(prev))], rng.randint(0, 50)]
        else:
            prompt = prev + [rng.randint(0, 50) for _ in range(rng.randint(0, 3))]
        response = [rng.randint(0, 50) for _ in range(rng.choice([0, 1, 2, 3]))]
        error = t.StepError(kind="upstream_status", message="503") if rng.random() < 0.1 else None
        steps.append(
            t.StepCaptured(
                step_id=f"{sid}/{k}",
                step_index=k,
                parent_step_id=parent,
                api=t.ApiKind.CHAT,
                model="m",
                prompt_token_ids=pack_tokens(prompt),
                response_token_ids=pack_tokens(response),
                response_logprobs=pack_logprobs([-0.1 * (i + 1) for i in range(len(response))]),
                sampling_params_json=json.dumps({"temperature": rng.choice([1.0, 1.0, 0.5])}),
                policy_version=rng.randint(0, 3),
                error=error,
            )
        )
        if error is None:
            prev, parent = prompt + response, f"{sid}/{k}"
    return steps


def test_awkward_sessions_train_alike_delta_encoded_or_full() -> None:
    rng = random.Random(11)
    encoded = 0
    for i in range(400):
        steps = _awkward(rng, f"s{i}")
        full = t.TrajectoryAssembled(
            event_id=f"traj:s{i}",
            session_id=f"s{i}",
            run_id="r",
            task=t.Task(task_id="x"),
            steps=tuple(steps),
            status=t.SessionStatus.OK,
        )
        dicts = [to_avro(s) for s in steps]
        assert encode_step_dicts(dicts) == []
        delta = full.model_copy(update={"steps": tuple(t.StepCaptured(**d) for d in dicts)})
        encoded += sum(1 for s in delta.steps if s.prompt_prefix_len)
        for merge in (True, False):
            assert trajectory_sequences(delta, "ep", 0.5, merge) == trajectory_sequences(
                full, "ep", 0.5, merge
            )
    assert encoded > 1000  # the deltas were exercised, not just full prompts


def test_a_prompt_that_cannot_be_restored_is_refused_naming_the_step() -> None:
    (traj,) = [assemble_trajectory(list(s.events()), restore=False) for s in _group(1, steps=3)]
    broken = traj.model_copy(update={"steps": traj.steps[:1] + traj.steps[2:]})
    with pytest.raises(MissingTokensError, match=r"g0/s2 has a delta-encoded prompt .* 'g0/s1'"):
        trajectory_sequences(broken, "ep", 1.0)
