"""A history for the viewer's tests, written as the sink writes it: rows from the sink's
``event_rows`` (each of our own events Avro-encoded and decoded by the codec first).

The synthetic history (runs on three benchmarks, training runs with policy updates, failed
steps, timeouts) plus three sessions of a run of its own: a chat agent calling a tool, with
token IDs and logprobs; a harness run whose output carries its logs; and a session that is
still open (the run is being written).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from rllm.consumers.history.batch import RowBuffer
from rllm.consumers.history.rows import event_rows
from rllm.consumers.history.types import HistoryStore
from rllm.schemas import types as t
from rllm.schemas.codec import AvroCodec
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from tests.samples import session_events
from tests.unit.consumers.history.synthetic import synthetic_events

__all__ = ["AGENT_RUN", "CHAT_SESSION", "HARNESS_SESSION", "OPEN_SESSION", "fill"]

AGENT_RUN = "agent-run"
CHAT_SESSION = "agent-run/calc/0"
HARNESS_SESSION = "agent-run/calc/1"
OPEN_SESSION = "agent-run/calc/2"
TOOLS = [{"type": "function", "function": {"name": "multiply", "parameters": {}}}]
SYSTEM = {"role": "system", "content": "You are a calculator."}
USER = {"role": "user", "content": "What is 7 times 8?"}
CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "multiply", "arguments": '{"a": 7, "b": 8}'},
}
ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_7", "content": "56"}
ANSWER_TOKENS = [[71, 72], [20, 21, 22]]
"""Token IDs each step of the chat session sampled."""
ANSWER_TEXTS = [['{"a"', ": 7}"], ["The", " answer", " is 56"]]
ANSWER_LOGPROBS = [[-0.05, -2.5], [-0.01, -0.7, -3.0]]


def _chat(
    content: str | None, calls: list[dict[str, Any]] | None, texts: list[str], lps: list[float]
) -> str:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if calls else "stop",
        "logprobs": {
            "content": [{"token": x, "logprob": lp} for x, lp in zip(texts, lps, strict=True)]
        },
    }
    return json.dumps({"choices": [choice]})


def _step(
    index: int, at: datetime, request: dict[str, Any], response: str, version: int
) -> t.StepCaptured:
    return t.StepCaptured(
        step_id=f"{CHAT_SESSION}/s{index}",
        step_index=index,
        parent_step_id=f"{CHAT_SESSION}/s{index - 1}" if index else None,
        api=t.ApiKind.CHAT,
        model="calc-model",
        request_json=json.dumps(request),
        response_json=response,
        prompt_token_ids=pack_tokens([1, 2, 3, 4 + index]),
        prompt_prefix_len=0,
        response_token_ids=pack_tokens(ANSWER_TOKENS[index]),
        response_logprobs=pack_logprobs(ANSWER_LOGPROBS[index]),
        finish_reason="stop",
        sampling_params_json='{"temperature": 1.0}',
        policy_version=version,
        upstream="local",
        started_at=at,
        latency_ms=40.0 + index,
        ttft_ms=5.0,
        overhead_ms=0.5,
        usage=t.Usage(prompt_tokens=4, completion_tokens=len(ANSWER_TOKENS[index])),
        token_status=t.TokenStatus.OK,
    )


def agent_events(now: datetime) -> list[t.SessionEvent]:
    """The three sessions of ``AGENT_RUN``; the open one's last event is ``now``."""
    task = t.Task(task_id="calc", instruction="What is 7 times 8?", benchmark="calc")
    t0 = now - timedelta(minutes=5)

    def opened(index: int) -> t.SessionOpened:
        return t.SessionOpened(
            task=task,
            rollout_index=index,
            group_size=3,
            agent="calc-agent",
            model="calc-model",
            policy_version=2,
        )

    first = {"model": "calc-model", "messages": [SYSTEM, USER], "tools": TOOLS}
    second = {
        "model": "calc-model",
        "messages": [SYSTEM, USER, ASSISTANT_CALL, TOOL_RESULT],
        "tools": TOOLS,
    }
    call = _chat(None, [CALL], ANSWER_TEXTS[0], ANSWER_LOGPROBS[0])
    said = _chat("The answer is 56", None, ANSWER_TEXTS[1], ANSWER_LOGPROBS[1])
    rewarded = t.RewardAssigned(
        reward=1.0, is_correct=True, signals={"exact": 1.0}, evaluator="exact_match"
    )
    ok = t.SessionStatus.OK
    chat = [
        opened(0),
        _step(0, t0, first, call, 2),
        _step(1, t0, second, said, 3),
        rewarded,
        t.SessionClosed(status=ok, output_json='"56"', num_steps=2),
    ]
    harness_out = {
        "harness": "bash",
        "task": "calc",
        "reason": "ok",
        "error": None,
        "agent_exit_code": 0,
        "agent_output_tail": "$ echo 56 > answer.txt\nverifier: 1 of 1 passed",
        "reward": 0.0,
        "values": {},
        "verifier_error": "answer.txt: expected 56, got 65",
        "verifier_exit_code": 1,
        "verifier_output_tail": "FAILED test_answer - 65 != 56",
        "artifacts": {"agent_log": "/var/tmp/artifacts/agent.log"},
    }
    verified = t.RewardAssigned(reward=0.0, is_correct=False, evaluator="harbor-verifier")
    harness_closed = t.SessionClosed(status=ok, output_json=json.dumps(harness_out), num_steps=0)
    return [
        *session_events(CHAT_SESSION, AGENT_RUN, chat, t0),
        *session_events(HARNESS_SESSION, AGENT_RUN, [opened(1), verified, harness_closed], t0),
        *session_events(OPEN_SESSION, AGENT_RUN, [opened(2)], now),
    ]


def fill(store: HistoryStore, synthetic_steps: int, now: datetime | None = None) -> None:
    """Write the synthetic history and ``AGENT_RUN`` into ``store``, as the sink does."""
    codec = AvroCodec()
    buf = RowBuffer()
    # the synthetic dicts are the decoded shape (their episodes carry only session ids)
    for i, (name, datum) in enumerate(synthetic_events(synthetic_steps)):
        buf.extend(event_rows(name, datum, ("synthetic", 0, i)))
    for i, ev in enumerate(agent_events(now or datetime.now(UTC))):
        buf.extend(event_rows(*codec.decode_dict(codec.encode(ev)), ("agent", 0, i)))
    for table, batch in buf.batches():
        store.insert(table, batch)
