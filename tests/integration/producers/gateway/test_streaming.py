"""Streams that stream (issue 17): every API's stream is translated chunk by chunk, so its
first token reaches the real client while the upstream is still generating, and the step
captured from the stream equals, token for token, the one of the same answer whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rllm.schemas.types import StepCaptured, TokenStatus
from tests.fakes.upstream import (
    FakeUpstream,
    RunningUpstream,
    ThreadedServer,
    answer_text,
    chat_prompt_text,
)
from tests.integration.producers.gateway.clients import APIS, Streamed, call
from tests.integration.producers.gateway.fixtures import DRIP_DELAY_S, Events, session_steps


def _expected(api: str, max_tokens: int | None) -> str:
    if api == "completions":
        return answer_text("hello world", max_tokens or 16)
    return answer_text(chat_prompt_text([{"role": "user", "content": "hello world"}]), max_tokens)


RESPONSES_TEXT = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
RESPONSES_DONE = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.mark.parametrize("api", APIS)
def test_the_first_token_reaches_the_client_before_the_upstream_finished(
    api: str,
    start_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    dripping: RunningUpstream,
) -> None:
    gw = start_gateway(upstream_url=dripping.url)
    cap = 5 if api == "completions" else None  # 5 or 4 tokens: 1.2 s or 0.9 s of dripping
    got = call(gw.url, f"drip-{api}", api, stream=True, max_tokens=cap)
    assert isinstance(got, Streamed)
    expected = _expected(api, cap)
    assert got.text == expected
    ended = dripping.state.stream_ends[-1]
    assert got.first_at is not None and got.first_at < ended, (got.first_at, ended)
    # one client event per upstream token: translated as it came, not replayed at the end
    assert got.deltas == len(expected.encode())
    if api == "responses":
        assert got.kinds == [
            *RESPONSES_TEXT,
            *["response.output_text.delta"] * got.deltas,
            *RESPONSES_DONE,
        ]
        done = got.events[-1].response
        assert done.output_text == expected and done.status == "completed"
        assert done.usage.output_tokens == len(expected.encode())
    if api == "anthropic":
        assert got.kinds == [
            "message_start",
            "content_block_start",
            *["content_block_delta"] * got.deltas,
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        start, end = got.events[0].message, got.events[-2]
        prompt = chat_prompt_text([{"role": "user", "content": "hello world"}])
        assert start.usage.input_tokens == len(prompt.encode())
        assert end.delta.stop_reason == "end_turn"
        assert end.usage.output_tokens == len(expected.encode())
    (step,) = session_steps(session_events, f"drip-{api}")
    assert step.token_status is TokenStatus.OK
    assert step.ttft_ms is not None
    # the step's own clock: the first chunk came well before the last one
    assert step.ttft_ms < step.latency_ms - 2 * DRIP_DELAY_S * 1000, (step.ttft_ms, step.latency_ms)


def _same_capture(whole: StepCaptured, streamed: StepCaptured) -> None:
    assert streamed.token_status is TokenStatus.OK and whole.token_status is TokenStatus.OK
    assert streamed.prompt_ids.tolist() == whole.prompt_ids.tolist()
    assert streamed.response_ids.tolist() == whole.response_ids.tolist()
    assert streamed.logprobs.tolist() == whole.logprobs.tolist()
    assert streamed.finish_reason == whole.finish_reason
    assert streamed.usage == whole.usage
    assert streamed.api == whole.api and streamed.error is None
    assert whole.ttft_ms is None and streamed.ttft_ms is not None
    assert 0 <= streamed.ttft_ms <= streamed.latency_ms


@pytest.mark.parametrize("api", APIS)
def test_a_streamed_answer_is_captured_as_the_whole_answer(
    api: str, start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    whole = call(gw.url, f"whole-{api}", api, stream=False)
    streamed = call(gw.url, f"stream-{api}", api, stream=True)
    assert isinstance(streamed, Streamed) and streamed.deltas > 1
    (w,) = session_steps(session_events, f"whole-{api}")
    (s,) = session_steps(session_events, f"stream-{api}")
    _same_capture(w, s)
    assert s.response_ids.tolist() == [b + 3 for b in streamed.text.encode()]
    if api == "chat":
        assert whole.choices[0].message.content == streamed.text
    elif api == "completions":
        assert whole.choices[0].text == streamed.text
    elif api == "responses":
        assert whole.output_text == streamed.text
        assert json.loads(s.response_json)["id"] == streamed.events[-1].response.id
    else:
        assert whole.content[0].text == streamed.text
        assert json.loads(s.response_json)["id"] == streamed.events[0].message.id


@pytest.mark.parametrize("incremental", [False, True], ids=["whole-outputs", "incremental"])
@pytest.mark.parametrize("api", APIS)
def test_a_streamed_generate_answer_is_captured_as_the_whole_answer(
    api: str,
    incremental: bool,
    start_sglang_gateway: Callable[..., ThreadedServer],
    start_upstream: Callable[[FakeUpstream], RunningUpstream],
    session_events: Events,
) -> None:
    state = FakeUpstream(generate_incremental=incremental)
    gw = start_sglang_gateway(upstream_url=start_upstream(state).url)
    whole = call(gw.url, f"whole-{api}", api, stream=False)
    streamed = call(gw.url, f"stream-{api}", api, stream=True)
    assert isinstance(streamed, Streamed)
    assert streamed.text == "ok done" and streamed.deltas == 3  # one delta per token
    assert [r["stream"] for r in state.requests] == [False, True]
    (w,) = session_steps(session_events, f"whole-{api}")
    (s,) = session_steps(session_events, f"stream-{api}")
    _same_capture(w, s)
    last = w.prompt_ids.tolist()[-1]
    assert s.response_ids.tolist() == [last + 1, last + 2, 2]
    assert s.logprobs.tolist() == pytest.approx([-0.05, -0.1, -0.15])
    text = {
        "chat": lambda: whole.choices[0].message.content,
        "completions": lambda: whole.choices[0].text,
        "responses": lambda: whole.output_text,
        "anthropic": lambda: whole.content[0].text,
    }[api]()
    assert text == "ok done"


def test_tool_calls_stream_as_function_call_and_tool_use_deltas(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    got = call(gw.url, "tools-responses", "responses", stream=True, tools=True)
    assert isinstance(got, Streamed)
    assert got.kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta = got.events[2], got.events[3]
    assert added.item.type == "function_call" and added.item.name == "get_weather"
    assert json.loads(delta.delta) == {"x": 1}
    (item,) = got.events[-1].response.output
    assert item.type == "function_call" and item.call_id == "call_0"
    assert json.loads(item.arguments) == {"x": 1} and item.id == added.item.id

    used = call(gw.url, "tools-anthropic", "anthropic", stream=True, tools=True)
    assert isinstance(used, Streamed)
    assert used.kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    block, piece = used.events[1].content_block, used.events[2].delta
    assert block.type == "tool_use" and block.name == "get_weather" and block.id == "call_0"
    assert piece.type == "input_json_delta" and json.loads(piece.partial_json) == {"x": 1}
    assert used.events[4].delta.stop_reason == "tool_use"
    for sid in ("tools-responses", "tools-anthropic"):
        (step,) = session_steps(session_events, sid)
        assert step.finish_reason == "tool_calls" and step.token_status is TokenStatus.OK
    content: Any = json.loads(session_steps(session_events, "tools-anthropic")[0].response_json)
    assert content["content"] == [
        {"type": "tool_use", "id": "call_0", "name": "get_weather", "input": {"x": 1}}
    ]


@pytest.mark.parametrize("api", ["chat", "anthropic"])
def test_a_generate_stream_reaches_the_client_before_the_upstream_finished(
    api: str,
    start_sglang_gateway: Callable[..., ThreadedServer],
    start_upstream: Callable[[FakeUpstream], RunningUpstream],
) -> None:
    state = FakeUpstream(chunk_delay_s=DRIP_DELAY_S)
    gw = start_sglang_gateway(upstream_url=start_upstream(state).url)
    got = call(gw.url, f"generate-{api}", api, stream=True)
    assert isinstance(got, Streamed) and got.text == "ok done" and got.deltas == 3
    (ended,) = state.stream_ends
    assert got.first_at is not None and got.first_at < ended, (got.first_at, ended)
