"""A demo session (open, three multi-turn steps, a reward, close) for ``rllm-cli events demo``."""

from __future__ import annotations

import json
import uuid

from rllm.kafka import EventPublisher
from rllm.schemas.envelope import envelope
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import (
    ApiKind,
    RewardAssigned,
    SessionClosed,
    SessionEvent,
    SessionOpened,
    SessionPayload,
    SessionStatus,
    StepCaptured,
    Task,
    Usage,
)

__all__ = ["demo_session_events", "publish_demo_session"]


def demo_session_events(session_id: str, run_id: str, num_steps: int = 3) -> list[SessionEvent]:
    """The events of one small multi-turn session; later steps carry only a prompt suffix."""
    payloads: list[SessionPayload] = [
        SessionOpened(
            task=Task(
                task_id="demo-0",
                instruction="What is 7 times 8?",
                ground_truth_json="56",
                reward_fn="exact_match",
                benchmark="demo",
            ),
            group_size=1,
            agent="demo",
            model="demo-model",
        )
    ]
    full_prompt: list[int] = []
    previous: list[int] = []  # parent's full prompt + response
    parent = None
    for i in range(num_steps):
        suffix = [1, 15, 27, 99, 4] if parent is None else [7, 8 + i]
        full_prompt = previous + suffix
        response = [100 + i, 200 + i, 2]
        payloads.append(
            StepCaptured(
                step_id=f"{session_id}:step-{i}",
                step_index=i,
                parent_step_id=parent,
                api=ApiKind.CHAT,
                model="demo-model",
                request_json=json.dumps({"messages": [{"role": "user", "content": "7*8?"}]}),
                response_json=json.dumps({"choices": [{"message": {"content": "56"}}]}),
                prompt_token_ids=pack_tokens(suffix),
                prompt_prefix_len=len(previous),
                response_token_ids=pack_tokens(response),
                response_logprobs=pack_logprobs([-0.25, -0.5, -0.01]),
                finish_reason="stop",
                usage=Usage(prompt_tokens=len(full_prompt), completion_tokens=len(response)),
            )
        )
        previous = full_prompt + response
        parent = f"{session_id}:step-{i}"
    payloads.append(RewardAssigned(reward=1.0, is_correct=True, evaluator="exact_match"))
    payloads.append(SessionClosed(status=SessionStatus.OK, output_json='"56"', num_steps=num_steps))
    return [envelope(session_id, run_id, "demo", p) for p in payloads]


def publish_demo_session(publisher: EventPublisher, run_id: str = "demo") -> str:
    """Publish one demo session and wait for every ack; return its session id."""
    session_id = f"demo/{uuid.uuid4().hex[:8]}"
    futures = [
        publisher.publish(SESSION_EVENTS, session_id, ev)
        for ev in demo_session_events(session_id, run_id)
    ]
    for fut in futures:
        fut.result(timeout=publisher.settings.request_timeout_s + 5)
    return session_id
