"""API adapters on canned upstream answers (no server)."""

from __future__ import annotations

import json

from rllm.producers.gateway.adapters import anthropic, responses
from rllm.producers.gateway.adapters.chat import ChatStream, parse_chat, prepare_chat
from rllm.producers.gateway.adapters.completions import parse_completion, prepare_completion

UP = {
    "id": "1",
    "prompt_token_ids": [1, 2],
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "token_ids": [5, 6],
            "message": {"role": "assistant", "content": "hi"},
            "logprobs": {
                "content": [{"token": "h", "logprob": -0.1}, {"token": "i", "logprob": -0.2}]
            },
        }
    ],
    "usage": {"prompt_tokens": 2, "completion_tokens": 2},
}


def test_chat_asks_for_tokens_and_strips_them() -> None:
    body = {"model": "m", "messages": []}
    assert prepare_chat(body, True) == {**body, "logprobs": True, "return_token_ids": True}
    parsed = parse_chat(body, json.loads(json.dumps(UP)))
    assert (parsed.prompt_ids, parsed.response_ids) == ([1, 2], [5, 6])
    assert parsed.logprobs == [-0.1, -0.2] and parsed.text == "hi"
    assert "prompt_token_ids" not in parsed.client
    assert parsed.client["choices"][0]["logprobs"] is None
    assert "token_ids" not in parsed.client["choices"][0]
    kept = parse_chat(
        {**body, "logprobs": True, "return_token_ids": True}, json.loads(json.dumps(UP))
    )
    assert kept.client["choices"][0]["logprobs"] is not None and "prompt_token_ids" in kept.client


def test_completion_asks_for_sampled_logprob_only() -> None:
    assert prepare_completion({"prompt": "x"}, True)["logprobs"] == 0
    assert prepare_completion({"prompt": "x", "logprobs": 3}, True)["logprobs"] == 3
    up = {
        "choices": [
            {
                "text": "a",
                "token_ids": [7],
                "prompt_token_ids": [1],
                "logprobs": {"token_logprobs": [-1.0]},
                "finish_reason": "length",
            }
        ]
    }
    parsed = parse_completion({"prompt": "x"}, up)
    assert (parsed.prompt_ids, parsed.response_ids, parsed.logprobs) == ([1], [7], [-1.0])
    assert parsed.client["choices"][0] == {"text": "a", "logprobs": None, "finish_reason": "length"}


def test_chat_stream_accumulates_tool_calls() -> None:
    acc = ChatStream({"model": "m"})
    acc.feed(
        {
            "prompt_token_ids": [1],
            "choices": [
                {
                    "index": 0,
                    "token_ids": [3],
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}}
                        ]
                    },
                }
            ],
        }
    )
    out = acc.feed(
        {
            "choices": [
                {
                    "index": 0,
                    "token_ids": [4],
                    "finish_reason": "tool_calls",
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                }
            ]
        }
    )
    assert "token_ids" not in out["choices"][0]
    parsed = acc.parsed()
    assert parsed.response_ids == [3, 4] and parsed.prompt_ids == [1]
    assert parsed.tool_calls[0]["function"] == {"name": "f", "arguments": '{"a": 1}'}


def test_anthropic_round_trip_shapes() -> None:
    body = {
        "model": "c",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "S"}],
        "stop_sequences": ["\n"],
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "r"}],
                    }
                ],
            },
        ],
    }
    chat = anthropic.to_chat(body)
    assert chat["messages"] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "r"},
    ]
    assert chat["max_tokens"] == 5 and chat["stop"] == ["\n"]
    parsed = parse_chat(chat, json.loads(json.dumps(UP)))
    answer = anthropic.from_chat(body, parsed)
    assert (
        answer["content"] == [{"type": "text", "text": "hi"}]
        and answer["stop_reason"] == "end_turn"
    )


def test_responses_translation_of_function_call_items() -> None:
    body = {
        "model": "m",
        "instructions": "I",
        "max_output_tokens": 9,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "out"},
        ],
    }
    chat = responses.to_chat(body)
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "tool"]
    assert chat["max_tokens"] == 9
    answer = responses.from_chat(body, parse_chat(chat, json.loads(json.dumps(UP))))
    assert answer["output"][0]["content"][0]["text"] == "hi"
    assert answer["usage"]["input_tokens"] == 2
