"""One fixed sample of every event record, shared by unit and integration tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from rllm.schemas import policy
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)

TASK = t.Task(
    task_id="gsm8k/17",
    instruction="What is 7 times 8?",
    ground_truth_json='"56"',
    reward_fn="math",
    benchmark="gsm8k",
    metadata_json='{"split": "test"}',
)
USAGE = t.Usage(prompt_tokens=5, completion_tokens=3, cached_tokens=2)
STEP_ERROR = t.StepError(kind="upstream_status", message="502 from upstream", status_code=502)
OPENED = t.SessionOpened(
    task=TASK,
    rollout_index=2,
    group_size=8,
    agent="codex",
    policy_version=4,
    model="smollm2-135m",
    metadata_json='{"k": 1}',
)
STEP = t.StepCaptured(
    step_id="step-1",
    step_index=1,
    parent_step_id="step-0",
    api=t.ApiKind.RESPONSES,
    model="smollm2-135m",
    request_json='{"input": "hi"}',
    response_json='{"output": []}',
    prompt_token_ids=pack_tokens([7, 8, 9]),
    prompt_prefix_len=12,
    response_token_ids=pack_tokens([101, 102, 2]),
    response_logprobs=pack_logprobs([-0.5, -0.25, -0.125]),
    finish_reason="stop",
    sampling_params_json='{"temperature": 1.0}',
    policy_version=4,
    upstream="local",
    started_at=T0,
    latency_ms=12.5,
    ttft_ms=3.25,
    overhead_ms=0.5,
    usage=USAGE,
    token_status=t.TokenStatus.OK,
    error=None,
)
FAILED_STEP = STEP.model_copy(
    update={
        "step_id": "step-2",
        "step_index": 2,
        "error": STEP_ERROR,
        "token_status": t.TokenStatus.MISSING,
        "response_token_ids": b"",
        "response_logprobs": b"",
    }
)
CLOSED = t.SessionClosed(status=t.SessionStatus.OK, output_json='"56"', num_steps=2)
REWARD = t.RewardAssigned(
    reward=1.0, is_correct=True, signals={"format": 0.5}, evaluator="math", metadata_json="{}"
)
ENVELOPE = t.SessionEvent(
    event_id="ev-1",
    session_id="run-1/task:17/0",
    run_id="run-1",
    emitted_at=T0,
    producer="gateway",
    payload=STEP,
)
TRAJECTORY = t.TrajectoryAssembled(
    event_id="traj:run-1/task:17/0",
    session_id="run-1/task:17/0",
    run_id="run-1",
    task=TASK,
    rollout_index=2,
    group_size=8,
    agent="codex",
    steps=(STEP,),
    status=t.SessionStatus.OK,
    output_json='"56"',
    num_steps_reported=1,
    reward=1.0,
    is_correct=True,
    reward_signals={"format": 0.5},
    evaluator="math",
    opened_at=T0,
    closed_at=T0,
    flags=("late_steps",),
)
EPISODE = t.EpisodeAssembled(
    event_id="ep:run-1/gsm8k/17",
    run_id="run-1",
    task=TASK,
    trajectories=(TRAJECTORY,),
    rewards=(1.0,),
    advantages=(0.0,),
    estimator="grpo",
    group_size=8,
    is_partial=True,
    uniform_reward=True,
    assembled_at=T0,
)
POLICY = policy.PolicyUpdated(
    event_id="pu-1",
    run_id="run-1",
    version=5,
    checkpoint_uri="file:///tmp/ckpt/5",
    base_model="smollm2-135m",
    backend="local",
    metrics={"loss": 0.25},
    num_episodes=4,
    num_tokens=1234,
    created_at=T0,
)
SERVED = policy.PolicyServed(
    event_id="gw-1/run-1/v5",
    gateway_id="gw-1",
    run_id="run-1",
    version=5,
    upstream_reports=True,
    served_at=T0,
)
DEAD = t.DeadLetter(
    source_topic="rllm.session-events",
    source_partition=1,
    source_offset=42,
    key=b"k",
    value=b"\x00garbage",
    reason="not an Avro event",
    error_type="DecodeError",
    consumer="assemble",
    failed_at=T0,
)

SAMPLES: dict[str, t.AvroRecord] = {
    "Task": TASK,
    "Usage": USAGE,
    "StepError": STEP_ERROR,
    "SessionOpened": OPENED,
    "StepCaptured": STEP,
    "SessionClosed": CLOSED,
    "RewardAssigned": REWARD,
    "SessionEvent": ENVELOPE,
    "TrajectoryAssembled": TRAJECTORY,
    "EpisodeAssembled": EPISODE,
    "PolicyUpdated": POLICY,
    "PolicyServed": SERVED,
    "DeadLetter": DEAD,
}


def session_events(
    session_id: str = "s-1",
    run_id: str = "run-1",
    payloads: Sequence[t.SessionPayload] = (OPENED, STEP, FAILED_STEP, REWARD, CLOSED),
    emitted_at: datetime = T0,
) -> list[t.SessionEvent]:
    """The session's ``payloads`` in their envelopes, event ``{session_id}-e{i}``, all
    emitted at ``emitted_at``; by default open, two steps, a reward and a close: one
    envelope per payload type."""
    return [
        t.SessionEvent(
            event_id=f"{session_id}-e{i}",
            session_id=session_id,
            run_id=run_id,
            emitted_at=emitted_at,
            producer="test",
            payload=p,
        )
        for i, p in enumerate(payloads)
    ]
