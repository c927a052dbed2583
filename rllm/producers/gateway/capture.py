"""Turn one upstream call into a ``StepCaptured``, delta-encoding multi-turn prompts.

Pure logic: the API adapters fill a ``Capture``; ``step_event`` builds the event and
returns the session's next delta state.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import numpy as np

from rllm.producers.gateway.sessions import DeltaState, Session
from rllm.producers.gateway.types import MAX_CHOICES, Capture, Sample
from rllm.schemas.delta import common_prefix_len, delta_prompt  # the one delta rule
from rllm.schemas.envelope import envelope
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.schemas.types import (
    SessionEvent,
    StepCaptured,
    StepError,
    TokenStatus,
    Usage,
)

__all__ = [
    "SAMPLING_KEYS",
    "choice_capture",
    "choices_asked",
    "common_prefix_len",
    "delta_prompt",
    "missing_choice",
    "sampling_params",
    "step_event",
    "too_large",
]

SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logprobs",
    "top_logprobs",
)


def sampling_params(body: dict[str, Any]) -> dict[str, Any]:
    """The sampling parameters of a request body."""
    return {k: body[k] for k in SAMPLING_KEYS if k in body}


def choices_asked(body: dict[str, Any]) -> int:
    """How many choices a request asks for (``n``; 1 when absent or not a sane integer)."""
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and 1 < n <= MAX_CHOICES:
        return n
    return 1


def choice_capture(cap: Capture, sample: Sample) -> Capture:
    """The capture of choice ``k >= 1`` of a call: the same prompt, request and timing, its
    own tokens and finish reason, the answer with only that choice, and no usage (the
    call's usage stays on the first choice's step, so sums over steps match the upstream)."""
    head = cap.response if isinstance(cap.response, dict) else {}
    response = {k: v for k, v in head.items() if k not in ("choices", "usage")}
    response["choices"] = [sample.choice]
    return dataclasses.replace(
        cap,
        response=response,
        response_ids=sample.response_ids,
        logprobs=sample.logprobs,
        finish_reason=sample.finish_reason,
        usage=Usage(),
        more=[],
    )


def missing_choice(cap: Capture, choice: int, asked: int) -> Capture:
    """A failed step for a reserved choice the call did not return (the call failed, or
    the upstream answered fewer than ``n`` choices), so step indices stay contiguous."""
    reason = cap.error.message[:500] if cap.error is not None else "the upstream returned fewer"
    return dataclasses.replace(
        cap,
        response=None,
        prompt_ids=None,
        response_ids=None,
        logprobs=None,
        usage=Usage(),
        more=[],
        error=StepError(
            kind="missing_choice",
            message=f"choice {choice} of n={asked} was not returned: {reason}",
        ),
    )


def too_large(cap: Capture, reason: str) -> Capture:
    """``cap`` as a failed step (kind ``too_large``) without its request, response and
    token IDs: what is published when the full step is over the event limit. A call that
    failed keeps its kind and reason in the message and its status in ``status_code`` (the
    HTTP status the agent got)."""
    message = (
        f"the step was published without its request, response and token IDs: {reason}; "
        "raise RLLM_MAX_MESSAGE_BYTES (and the topic's max.message.bytes) to capture such calls"
    )
    failed = cap.error
    if failed is not None:
        status = f" {failed.status_code}" if failed.status_code is not None else ""
        message += f" (the call itself failed: {failed.kind}{status}: {failed.message[:500]})"
    return dataclasses.replace(
        cap,
        request=None,
        response=None,
        prompt_ids=None,
        response_ids=None,
        logprobs=None,
        error=StepError(
            kind="too_large",
            message=message[:2000],
            status_code=failed.status_code if failed is not None else None,
        ),
    )


def step_event(
    session: Session, cap: Capture, step_index: int, producer: str
) -> tuple[SessionEvent, DeltaState]:
    """The ``StepCaptured`` event of a call and the session's delta state after it (its
    parent for the next delta, its step count and its token totals); the session itself
    is not changed: ``Session.advance`` takes the new state once the event is taken."""
    state = session.delta
    step_id = uuid.uuid4().hex
    has_tokens = cap.prompt_ids is not None and cap.response_ids is not None and cap.error is None
    prefix_len, parent = 0, None
    prompt_b = resp_b = lp_b = b""
    if has_tokens:
        prompt = np.asarray(cap.prompt_ids, dtype=np.int32)
        response = np.asarray(cap.response_ids, dtype=np.int32)
        suffix = prompt
        if state.last_step_id is not None:
            prefix_len, suffix = delta_prompt(state.last_full_ids, prompt)
            parent = state.last_step_id if prefix_len else None
        prompt_b, resp_b = pack_tokens(suffix), pack_tokens(response)
        lp_b = pack_logprobs(cap.logprobs or [])
        state = dataclasses.replace(
            state, last_step_id=step_id, last_full_ids=np.concatenate([prompt, response])
        )
    state = dataclasses.replace(
        state,
        num_steps=state.num_steps + 1,
        prompt_tokens=state.prompt_tokens + cap.usage.prompt_tokens,
        completion_tokens=state.completion_tokens + cap.usage.completion_tokens,
    )
    step = StepCaptured(
        step_id=step_id,
        step_index=step_index,
        parent_step_id=parent,
        api=cap.api,
        model=cap.model,
        request_json=json.dumps(cap.request, separators=(",", ":")),
        response_json=json.dumps(cap.response, separators=(",", ":")),
        prompt_token_ids=prompt_b,
        prompt_prefix_len=prefix_len,
        response_token_ids=resp_b,
        response_logprobs=lp_b,
        finish_reason=cap.finish_reason,
        sampling_params_json=json.dumps(cap.sampling, separators=(",", ":")),
        policy_version=cap.policy_version,
        upstream=cap.upstream,
        started_at=cap.started_at,
        latency_ms=cap.latency_ms,
        ttft_ms=cap.ttft_ms,
        overhead_ms=cap.overhead_ms,
        usage=cap.usage,
        token_status=TokenStatus.OK if has_tokens else TokenStatus.MISSING,
        error=cap.error,
    )
    return envelope(session.session_id, session.run_id, producer, step), state
