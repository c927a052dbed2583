"""The stream translators, chunk by chunk: Responses and Anthropic events from chat chunks,
SGLang ``/generate`` outputs as OpenAI chunks (whole-so-far or incremental alike), a whole
answer as chunks, and the upstream's stream payloads (errors mid-stream refused)."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from rllm.producers.gateway.adapters.anthropic_stream import AnthropicStream
from rllm.producers.gateway.adapters.chat import ChatStream, parse_chat
from rllm.producers.gateway.adapters.completions import CompletionStream, parse_completion
from rllm.producers.gateway.adapters.responses_stream import ResponsesStream
from rllm.producers.gateway.adapters.stream import OpenAIStream, as_chunks
from rllm.producers.gateway.sglang_stream import GenerateStream
from rllm.producers.gateway.streaming import sse_json
from rllm.producers.gateway.upstreams import UpstreamFailure


def _chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> dict[str, Any]:
    return {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **more}


def _call(index: int, name: str | None, args: str, id_: str | None = None) -> dict[str, Any]:
    fn = {"arguments": args} if name is None else {"name": name, "arguments": args}
    return {"index": index, **({"id": id_} if id_ else {}), "function": fn}


CHUNKS = [
    _chunk({"role": "assistant", "content": "Hel"}, prompt_token_ids=[1, 2, 3]),
    _chunk({"content": "lo"}),
    _chunk({"tool_calls": [_call(0, "f", '{"a"', "call_f")]}),
    _chunk({"tool_calls": [_call(0, None, ": 1}")]}),
    _chunk({"tool_calls": [_call(1, "g", "{}", "call_g")]}),
    _chunk({}, "tool_calls"),
    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}},
]
"""Text, a tool call whose arguments come in two pieces, a second tool call, then usage."""


def _events(raw: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for event in b"".join(raw).decode().split("\n\n"):
        if event:
            *head, data = event.split("\n")
            kind = head[0].removeprefix("event: ") if head else ""
            out.append((kind, json.loads(data.removeprefix("data: "))))
    return out


def _run(encoder: Any, capture: ChatStream) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    raw: list[bytes] = []
    for chunk in copy.deepcopy(CHUNKS):
        raw += encoder.feed(capture.feed(chunk))
    closing, answer = encoder.finish(capture.parsed())
    return _events(raw + closing), answer


def test_responses_events_follow_the_chunks() -> None:
    body = {"model": "m", "input": "q"}
    events, answer = _run(ResponsesStream(body), ChatStream({}))
    assert [kind for kind, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    assert [e["delta"] for k, e in events if k.endswith(".delta")] == [
        "Hel",
        "lo",
        '{"a"',
        ": 1}",
        "{}",
    ]
    assert [e["output_index"] for k, e in events if k == "response.output_item.done"] == [0, 1, 2]
    output = answer["output"]
    assert [o["type"] for o in output] == ["message", "function_call", "function_call"]
    assert output[0]["content"][0]["text"] == "Hello"
    assert (output[1]["call_id"], output[1]["name"], output[1]["arguments"]) == (
        "call_f",
        "f",
        '{"a": 1}',
    )
    assert events[-1][1]["response"] == answer and answer["status"] == "completed"
    assert answer["usage"]["input_tokens"] == 3 and answer["usage"]["output_tokens"] == 9
    assert events[0][1]["response"]["id"] == answer["id"]


def test_anthropic_events_follow_the_chunks() -> None:
    capture = ChatStream({})
    events, answer = _run(AnthropicStream({"model": "claude"}, capture), capture)
    assert [kind for kind, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0][1]["message"]["usage"] == {"input_tokens": 3, "output_tokens": 0}
    starts = [e["content_block"] for k, e in events if k == "content_block_start"]
    assert starts == [
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "call_f", "name": "f", "input": {}},
        {"type": "tool_use", "id": "call_g", "name": "g", "input": {}},
    ]
    pieces = [e["delta"] for k, e in events if k == "content_block_delta"]
    assert [p.get("partial_json", p.get("text")) for p in pieces] == [
        "Hel",
        "lo",
        '{"a"',
        ": 1}",
        "{}",
    ]
    assert [e["index"] for k, e in events if k == "content_block_stop"] == [0, 1, 2]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"] == {"input_tokens": 3, "output_tokens": 9}
    assert answer["content"] == [
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "call_f", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "call_g", "name": "g", "input": {}},
    ]


def test_stream_errors_take_each_apis_shape() -> None:
    (openai_event,) = _events(OpenAIStream(usage=False).fail(502, "upstream_unreachable", "x"))
    assert openai_event[1] == {
        "error": {"message": "x", "type": "upstream_unreachable", "code": 502}
    }
    events = _events(ResponsesStream({"model": "m"}).fail(504, "upstream_timeout", "late"))
    assert [k for k, _ in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "upstream_timeout: late"}
    events = _events(
        AnthropicStream({"model": "m"}, ChatStream({})).fail(504, "upstream_timeout", "late")
    )
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "timeout_error", "message": "upstream_timeout: late"}},
    )


def test_the_openai_stream_relays_usage_only_when_asked() -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 1}}
    assert OpenAIStream(usage=False).feed(dict(usage)) == []
    assert len(OpenAIStream(usage=True).feed(dict(usage))) == 1
    (event,) = OpenAIStream(usage=False).feed({"choices": [{"index": 0}], "usage": None})
    assert json.loads(event.decode()[6:]) == {"choices": [{"index": 0}]}


def _generate_outputs(incremental: bool) -> list[dict[str, Any]]:
    """Two samples of three tokens, interleaved, as SGLang streams them."""
    pieces = ["a", "b ", "c"]
    outs = []
    for k in range(1, 4):
        for j in range(2):
            ids = [10 + j, 11 + j, 2][:k]
            lps = [[-0.1 * (i + 1), t, None] for i, t in enumerate(ids)]
            text = "".join(pieces[:k])
            if incremental:
                ids, lps, text = ids[-1:], lps[-1:], pieces[k - 1]
            outs.append(
                {
                    "index": j,
                    "text": text,
                    "output_ids": ids,
                    "meta_info": {
                        "completion_tokens": k,
                        "finish_reason": {"type": "stop"} if k == 3 else None,
                        "output_token_logprobs": lps,
                    },
                }
            )
    return outs


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_generate_outputs_whole_or_incremental_become_the_same_chunks(chat: bool) -> None:
    def chunks(incremental: bool) -> list[dict[str, Any]]:
        stream = GenerateStream({"model": "m", "n": 2}, chat, [1, 2])
        got = [c for out in _generate_outputs(incremental) for c in stream.feed(out)]
        return [{k: v for k, v in c.items() if k != "id"} for c in got + stream.end()]

    whole = chunks(False)
    assert whole == chunks(True)
    capture = ChatStream({}) if chat else CompletionStream({})
    for chunk in whole:
        capture.feed(chunk)
    parsed = capture.parsed()
    assert parsed.prompt_ids == [1, 2] and parsed.response_ids == [10, 11, 2]
    assert parsed.logprobs == pytest.approx([-0.1, -0.2, -0.3])
    assert parsed.text == "ab c" and parsed.finish_reason == "stop"
    (other,) = parsed.more
    assert other.response_ids == [11, 12, 2] and other.finish_reason == "stop"
    assert parsed.usage.prompt_tokens == 2 and parsed.usage.completion_tokens == 6


WHOLE_CHAT = {
    "id": "w",
    "model": "m",
    "prompt_token_ids": [1, 2],
    "choices": [
        {
            "index": k,
            "message": {
                "role": "assistant",
                "content": f"t{k}",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "logprobs": {"content": [{"token": "a", "logprob": -0.5 * (k + 1)}]},
            "token_ids": [7 + k],
            "finish_reason": "tool_calls",
        }
        for k in range(2)
    ],
    "usage": {"prompt_tokens": 2, "completion_tokens": 2},
}


def test_a_whole_answer_cut_into_chunks_captures_as_the_whole_answer() -> None:
    for chat, data, parse in [
        (True, WHOLE_CHAT, parse_chat),
        (
            False,
            {
                "id": "w",
                "choices": [
                    {
                        "index": 0,
                        "text": "t",
                        "prompt_token_ids": [1, 2],
                        "token_ids": [7],
                        "logprobs": {"tokens": ["t"], "token_logprobs": [-0.5]},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 2, "completion_tokens": 1},
            },
            parse_completion,
        ),
    ]:
        whole = parse({}, copy.deepcopy(data))
        capture = ChatStream({}) if chat else CompletionStream({})
        for chunk in as_chunks(copy.deepcopy(data), chat):
            capture.feed(chunk)
        streamed = capture.parsed()
        for name in ("prompt_ids", "response_ids", "logprobs", "finish_reason", "usage", "text"):
            assert getattr(streamed, name) == getattr(whole, name), name
        assert [(s.response_ids, s.logprobs) for s in streamed.more] == [
            (s.response_ids, s.logprobs) for s in whole.more
        ]
        if chat:
            assert streamed.tool_calls == whole.tool_calls


async def _payloads(body: bytes) -> list[dict[str, Any]]:
    resp = httpx.Response(200, content=body)
    return [p async for p in sse_json(resp)]


async def test_upstream_payloads_stop_at_done_and_errors_are_failures() -> None:
    body = b'data: {"a": 1}\n\n: keep-alive\n\ndata: {"b": 2}\n\ndata: [DONE]\n\ndata: {"c": 3}\n\n'
    assert await _payloads(body) == [{"a": 1}, {"b": 2}]
    for bad, kind, says in [
        (b'data: {"error": {"message": "boom"}}\n\n', "upstream_status", "boom"),
        (b'data: {"object": "error", "message": "vllm boom"}\n\n', "upstream_status", "vllm boom"),
        (b"data: {not json\n\n", "invalid_response", "not JSON"),
        (b"data: [1, 2]\n\n", "invalid_response", "not an object"),
    ]:
        with pytest.raises(UpstreamFailure) as failed:
            await _payloads(b'data: {"a": 1}\n\n' + bad)
        assert failed.value.error.kind == kind and says in failed.value.error.message
