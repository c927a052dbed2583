"""Responses (real ``openai``) and Anthropic Messages (real ``anthropic``) translated to chat
upstream, with token IDs captured on every API."""

from __future__ import annotations

import json
from collections.abc import Callable

import anthropic
import openai

from rllm.schemas.types import ApiKind, SessionEvent, StepCaptured, TokenStatus
from tests.fakes.upstream import (
    RunningUpstream,
    ThreadedServer,
    answer_text,
    chat_prompt_text,
    tokenize,
)
from tests.integration.producers.gateway.fixtures import ADMIN_KEY, Events

TOOL = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _steps(events: list[tuple[str, SessionEvent]]) -> list[StepCaptured]:
    return [e.payload for _, e in events if isinstance(e.payload, StepCaptured)]


def test_responses_api_plain_and_streaming(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    client = openai.OpenAI(base_url=f"{gw.url}/sessions/codex:1/v1", api_key=ADMIN_KEY)
    resp = client.responses.create(model="m", input="hi", instructions="be brief")
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    expected = answer_text(chat_prompt_text(messages), None)
    assert resp.output_text == expected
    assert resp.usage is not None and resp.usage.output_tokens == len(tokenize(expected))
    stream = client.responses.create(model="m", input="hi", instructions="be brief", stream=True)
    kinds, deltas = [], []
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    assert "".join(deltas) == expected
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    tool = client.responses.create(
        model="m",
        input="weather?",
        tools=[{"type": "function", "name": "get_weather", "parameters": TOOL["input_schema"]}],
    )
    client.close()
    calls = [o for o in tool.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert json.loads(calls[0].arguments) == {"x": 1}
    steps = _steps(session_events())
    assert [s.api for s in steps] == [ApiKind.RESPONSES] * 3
    assert all(s.token_status is TokenStatus.OK for s in steps)
    assert steps[0].prompt_ids.tolist() == tokenize(chat_prompt_text(messages))
    assert steps[0].response_ids.tolist() == tokenize(expected)
    assert steps[2].finish_reason == "tool_calls"
    assert json.loads(steps[0].response_json)["object"] == "response"


def test_anthropic_messages_beta_streaming_and_tool_use(
    start_gateway: Callable[..., ThreadedServer], session_events: Events, upstream: RunningUpstream
) -> None:
    gw = start_gateway()
    client = anthropic.Anthropic(base_url=f"{gw.url}/sessions/claude/1", api_key=ADMIN_KEY)
    msg = client.messages.create(
        model="claude-x",
        max_tokens=64,
        system="sys",
        messages=[{"role": "user", "content": "hello"}],
    )
    expected = answer_text(
        chat_prompt_text(
            [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
        ),
        64,
    )
    assert msg.content[0].type == "text" and msg.content[0].text == expected
    assert msg.stop_reason == "end_turn"
    with client.beta.messages.stream(
        model="claude-x",
        max_tokens=64,
        system="sys",
        messages=[{"role": "user", "content": "hello"}],
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == expected
    first = client.messages.create(
        model="claude-x",
        max_tokens=64,
        tools=[TOOL],  # type: ignore[list-item]  # a plain dict, not the SDK's ToolParam
        messages=[{"role": "user", "content": "weather in Paris?"}],
    )
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "get_weather" and use.input == {"x": 1}
    second = client.messages.create(
        model="claude-x",
        max_tokens=64,
        tools=[TOOL],  # type: ignore[list-item]  # a plain dict, not the SDK's ToolParam
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ],
    )
    assert second.stop_reason == "end_turn" and second.content[0].type == "text"
    client.close()
    sent = upstream.state.requests[-1]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": use.id, "content": "sunny"}
    steps = _steps(session_events())
    assert [s.api for s in steps] == [ApiKind.ANTHROPIC_MESSAGES] * 4
    assert steps[1].response_ids.tolist() == tokenize(expected)
    # the tool round trip extends the first tool step: delta-encoded
    assert steps[3].parent_step_id == steps[2].step_id and steps[3].prompt_prefix_len > 0
