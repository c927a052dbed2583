"""Pure assembly: prompt restoration, ordering, dedup, flags and refusals."""

from __future__ import annotations

import random

import pytest

from rllm.processors.assemble import assemble_trajectory
from rllm.processors.assemble_dicts import assemble_trajectory_dict
from rllm.processors.errors import AssemblyError
from rllm.schemas.codec import AvroCodec
from rllm.schemas.delta import encode_step_dicts, restore_step_dicts, restore_steps
from rllm.schemas.tokens import pack_tokens
from rllm.schemas.types import SessionClosed, SessionStatus, StepCaptured, TokenStatus
from tests.unit.processors.factory import make_session


def test_restores_full_prompts_from_prefix_deltas_in_step_order() -> None:
    events = make_session("s", num_steps=3, reward=0.5)
    shuffled = events[:1] + random.Random(3).sample(events[1:4], 3) + events[4:]
    traj = assemble_trajectory(shuffled + events[1:3])  # plus duplicates
    assert traj.event_id == "traj:s" and traj.reward == 0.5 and traj.evaluator == "ext"
    assert [s.step_index for s in traj.steps] == [0, 1, 2]
    # hand reference: step 1 = step 0 prompt + response + [501, 601]; step 2 extends step 1
    assert [s.prompt_ids.tolist() for s in traj.steps] == [
        [1, 2, 3],
        [1, 2, 3, 1000, 1001, 1002, 1003, 501, 601],
        [1, 2, 3, 1000, 1001, 1002, 1003, 501, 601, 2000, 2001, 2002, 2003, 502, 602],
    ]
    assert all(s.prompt_prefix_len == 0 for s in traj.steps)
    assert traj.flags == () and traj.num_steps_reported == 3
    assert traj.opened_at == events[0].emitted_at and traj.closed_at == events[-1].emitted_at


def test_prefix_shorter_than_parent_takes_only_the_prefix() -> None:
    parent = make_session("s", num_steps=1)[1].payload
    assert isinstance(parent, StepCaptured)
    child = parent.model_copy(
        update={
            "step_id": "c",
            "step_index": 1,
            "parent_step_id": parent.step_id,
            "prompt_prefix_len": 2,
            "prompt_token_ids": pack_tokens([9]),
        }
    )
    steps, flags = restore_steps([parent, child])
    assert steps[1].prompt_ids.tolist() == [1, 2, 9] and flags == []


def test_missing_parent_is_flagged_and_kept() -> None:
    events = make_session("s", num_steps=3)
    traj = assemble_trajectory(events[:2] + events[3:])  # step 1 lost: step 2 cannot restore
    assert traj.flags == ("step_count_mismatch", "step_index_gap", "unrestored_prompt")
    assert traj.steps[1].prompt_prefix_len > 0


def test_count_mismatch_missing_tokens_and_refusals() -> None:
    events = make_session("s", num_steps=2, reported_steps=4)
    step = events[1].payload
    assert isinstance(step, StepCaptured)
    events[1] = events[1].model_copy(
        update={"payload": step.model_copy(update={"token_status": TokenStatus.MISSING})}
    )
    traj = assemble_trajectory(events)
    assert traj.flags == ("missing_tokens", "step_count_mismatch")
    assert traj.num_steps_reported == 4 and len(traj.steps) == 2
    with pytest.raises(AssemblyError, match="no SessionOpened"):
        assemble_trajectory(events[1:])
    with pytest.raises(AssemblyError, match="not closed"):
        assemble_trajectory(events[:-1])


def test_idle_timeout_closes_with_status_timeout() -> None:
    events = make_session("s", num_steps=2, close=False)
    traj = assemble_trajectory(events, idle_timeout=True)
    assert traj.status == SessionStatus.TIMEOUT and traj.flags == ("idle_timeout",)
    assert traj.closed_at == events[-1].emitted_at
    assert isinstance(make_session("t")[-1].payload, SessionClosed)


def test_dict_restore_and_delta_encoding_round_trip_byte_for_byte() -> None:
    codec = AvroCodec()
    events = make_session("s", num_steps=4)
    delta = assemble_trajectory(events, restore=False)
    assert [s.prompt_prefix_len for s in delta.steps] == [0, 7, 13, 19]
    full = assemble_trajectory(events)
    _, d = codec.decode_dict(codec.encode(delta))
    assert restore_step_dicts(d["steps"]) == []
    assert codec.encode_dict("TrajectoryAssembled", d) == codec.encode(full)
    encode_step_dicts(d["steps"])
    assert codec.encode_dict("TrajectoryAssembled", d) == codec.encode(delta)
    # a missing parent: flagged like restore_steps, the step stays delta-encoded
    _, gap = codec.decode_dict(
        codec.encode(assemble_trajectory(events[:2] + events[3:], restore=False))
    )
    assert restore_step_dicts(gap["steps"]) == ["unrestored_prompt"]
    assert [s["prompt_prefix_len"] for s in gap["steps"]] == [0, 13, 19]


@pytest.mark.parametrize(
    "case", ["plain", "reward_dups_shuffled", "gap", "mismatch", "idle", "no_open", "not_closed"]
)
def test_dict_assembly_matches_the_model_assembly_byte_for_byte(case: str) -> None:
    codec = AvroCodec()
    events = make_session(
        "s",
        num_steps=3,
        reward=0.5 if case != "plain" else None,
        reported_steps=5 if case == "mismatch" else None,
        close=case not in ("idle", "not_closed"),
    )
    if case == "reward_dups_shuffled":
        events = events[:1] + random.Random(5).sample(events[1:], len(events) - 1) + events[1:3]
    elif case == "gap":
        events = events[:2] + events[3:]
    elif case == "no_open":
        events = events[1:]
    idle = case == "idle"
    dicts = [codec.decode_dict(codec.encode(e))[1] for e in events]
    if case in ("no_open", "not_closed"):
        with pytest.raises(AssemblyError) as model_err:
            assemble_trajectory(events, restore=False)
        with pytest.raises(AssemblyError) as dict_err:
            assemble_trajectory_dict(dicts)
        assert str(dict_err.value) == str(model_err.value)
        return
    want = codec.encode(assemble_trajectory(events, idle_timeout=idle, restore=False))
    got = codec.encode_dict(
        "TrajectoryAssembled", assemble_trajectory_dict(dicts, idle_timeout=idle)
    )
    assert got == want
