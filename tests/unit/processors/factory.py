"""Session-event factories for the processor tests (unit and integration)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens

__all__ = ["T0", "chat_response", "envelopes", "make_session", "task"]

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def task(
    task_id: str = "task-1", answer: str = "56", reward_fn: str | None = "exact_match"
) -> t.Task:
    """A task with a ground truth."""
    return t.Task(
        task_id=task_id,
        instruction="What is 7 times 8?",
        ground_truth_json=json.dumps(answer),
        reward_fn=reward_fn,
        benchmark="unit",
    )


def chat_response(text: str) -> str:
    """An OpenAI chat completion body saying ``text``."""
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    )


def make_session(
    session_id: str,
    run_id: str = "run-1",
    *,
    the_task: t.Task | None = None,
    rollout_index: int = 0,
    group_size: int = 1,
    num_steps: int = 3,
    answer: str = "56",
    output_json: str | None = None,
    reported_steps: int | None = None,
    reward: float | None = None,
    close: bool = True,
    tokens_per_step: int = 4,
) -> list[t.SessionEvent]:
    """Open, ``num_steps`` delta-encoded steps (step k's prompt extends step k-1's prompt and
    response by 2 tokens), an optional reward and a close. Token ids are deterministic:
    step k's full prompt is ``range(1, ...)`` concatenations checkable by hand.
    """
    the_task = the_task or task()
    payloads: list[t.SessionPayload] = [
        t.SessionOpened(
            task=the_task, rollout_index=rollout_index, group_size=group_size, agent="unit"
        )
    ]
    prev_full: list[int] = []
    for k in range(num_steps):
        response = [1000 * (k + 1) + j for j in range(tokens_per_step)]
        if k == 0:
            prompt, prefix = [1, 2, 3], 0
            full = prompt
        else:
            prompt, prefix = [500 + k, 600 + k], len(prev_full)
            full = prev_full + prompt
        payloads.append(
            t.StepCaptured(
                step_id=f"{session_id}/s{k}",
                step_index=k,
                parent_step_id=f"{session_id}/s{k - 1}" if k else None,
                api=t.ApiKind.CHAT,
                model="m",
                response_json=chat_response(answer if k == num_steps - 1 else "..."),
                prompt_token_ids=pack_tokens(prompt),
                prompt_prefix_len=prefix,
                response_token_ids=pack_tokens(response),
                response_logprobs=pack_logprobs([-0.5] * tokens_per_step),
                started_at=T0 + timedelta(seconds=k),
            )
        )
        prev_full = full + response
    if reward is not None:
        payloads.append(t.RewardAssigned(reward=reward, is_correct=reward > 0, evaluator="ext"))
    if close:
        payloads.append(
            t.SessionClosed(
                status=t.SessionStatus.OK,
                output_json=output_json,
                num_steps=num_steps if reported_steps is None else reported_steps,
            )
        )
    return list(envelopes(payloads, session_id, run_id))


def envelopes(
    payloads: Iterable[t.SessionPayload], session_id: str, run_id: str, producer: str = "unit"
) -> Iterator[t.SessionEvent]:
    """Each payload in its session's envelope, in order (as the payloads come): event
    ``{session_id}/e{i}``, emitted ``i`` seconds after ``T0``."""
    for i, payload in enumerate(payloads):
        yield t.SessionEvent(
            event_id=f"{session_id}/e{i}",
            session_id=session_id,
            run_id=run_id,
            emitted_at=T0 + timedelta(seconds=i),
            producer=producer,
            payload=payload,
        )
