"""A trajectory as a person reads it: each step's new messages, its answer (text and tool
calls), and the sampled tokens with their logprobs. Pure functions over the JSON the
gateway captured (``request_json``/``response_json``) and the step's token arrays.

Chat, completions, Responses and Anthropic Messages are read; any other shape is shown as
its JSON, never dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Message",
    "Token",
    "ToolCall",
    "new_messages",
    "parse_json",
    "request_messages",
    "response_messages",
    "tokens",
]


@dataclass(frozen=True)
class ToolCall:
    """A call of a tool by the model."""

    name: str
    """The tool's name."""
    arguments: str
    """Its arguments as the model wrote them (JSON text, usually)."""
    call_id: str = ""
    """The id its result refers to."""


@dataclass(frozen=True)
class Message:
    """One message of a conversation."""

    role: str
    """system, user, assistant, tool (or the API's own word)."""
    text: str
    """Its text (content parts joined; a tool result's output)."""
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    """Tools the assistant called in it."""
    call_id: str = ""
    """For a tool result: the call it answers."""


@dataclass(frozen=True)
class Token:
    """One sampled token."""

    token_id: int
    """The ID the model sampled."""
    text: str
    """Its text when the answer carries it, else ''."""
    logprob: float | None
    """Its log-probability (None when the step has none)."""

    @property
    def prob(self) -> float | None:
        """``exp(logprob)``."""
        return None if self.logprob is None else math.exp(self.logprob)


def parse_json(text: str) -> Any:
    """``text`` as JSON, or the text itself when it is not JSON ('' for none)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text(content: Any) -> str:
    """Content as text: a string, or the text of its parts (others as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == "tool_result":
                parts.append(_text(part.get("content")))
            elif isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "tool_use":
                continue  # shown as a tool call
            else:
                parts.append(json.dumps(part, sort_keys=True))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True)


def _chat_tool_calls(msg: dict[str, Any]) -> tuple[ToolCall, ...]:
    calls = []
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments", "")
        calls.append(
            ToolCall(
                str(fn.get("name", "")),
                args if isinstance(args, str) else json.dumps(args),
                str(call.get("id", "")),
            )
        )
    return tuple(calls)


def _anthropic_message(msg: dict[str, Any]) -> list[Message]:
    """An Anthropic message: its text, its tool_use blocks as calls, tool_result blocks as
    tool messages of their own."""
    content = msg.get("content")
    role = str(msg.get("role", ""))
    if not isinstance(content, list):
        return [Message(role, _text(content))]
    out = [
        Message("tool", _text(b.get("content")), call_id=str(b.get("tool_use_id", "")))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    calls = tuple(
        ToolCall(str(b.get("name", "")), json.dumps(b.get("input", {})), str(b.get("id", "")))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    if rest or calls:
        out.append(Message(role, _text(rest), calls))
    return out


def _responses_items(items: Any) -> list[Message]:
    """Responses API input or output items."""
    if isinstance(items, str):
        return [Message("user", items)]
    out: list[Message] = []
    for item in items or []:
        if not isinstance(item, dict):
            out.append(Message("user", _text(item)))
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            call = ToolCall(
                str(item.get("name", "")),
                str(item.get("arguments", "")),
                str(item.get("call_id", "")),
            )
            out.append(Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            out.append(
                Message("tool", _text(item.get("output")), call_id=str(item.get("call_id", "")))
            )
        elif kind == "message" or "role" in item:
            out.append(Message(str(item.get("role", "assistant")), _text(item.get("content"))))
        else:
            out.append(Message(str(kind), json.dumps(item, sort_keys=True)))
    return out


def request_messages(api: str, request: Any) -> list[Message]:
    """The conversation a request sent, in order (its system prompt first)."""
    if not isinstance(request, dict):
        return [Message("request", _text(request))] if request else []
    if api == "completions":
        prompt = request.get("prompt", "")
        return [Message("prompt", _text(prompt[0] if isinstance(prompt, list) else prompt))]
    if api == "responses":
        head = (
            [Message("system", str(request["instructions"]))] if request.get("instructions") else []
        )
        return head + _responses_items(request.get("input"))
    if api == "anthropic_messages":
        system = request.get("system")
        head = [Message("system", _text(system))] if system else []
        return head + [m for msg in request.get("messages") or [] for m in _anthropic_message(msg)]
    if isinstance(request.get("messages"), list):
        return [
            Message(
                str(m.get("role", "")),
                _text(m.get("content")),
                _chat_tool_calls(m),
                str(m.get("tool_call_id", "")),
            )
            for m in request["messages"]
            if isinstance(m, dict)
        ]
    return [Message("request", json.dumps(request, sort_keys=True))]


def response_messages(api: str, response: Any) -> list[Message]:
    """What the model answered (choice 0 and, for ``n > 1``, only choice 0)."""
    if not isinstance(response, dict):
        return [Message("response", _text(response))] if response else []
    if api == "responses":
        return _responses_items(response.get("output"))
    if api == "anthropic_messages":
        return _anthropic_message({"role": "assistant", "content": response.get("content")})
    choices = response.get("choices")
    if isinstance(choices, list) and choices:
        first = choices[0] or {}
        if "message" in first:
            msg = first["message"] or {}
            return [
                Message(
                    str(msg.get("role", "assistant")),
                    _text(msg.get("content")),
                    _chat_tool_calls(msg),
                )
            ]
        if "text" in first:
            return [Message("completion", _text(first.get("text")))]
    return [Message("response", json.dumps(response, sort_keys=True))]


def new_messages(earlier: Sequence[Message], current: Sequence[Message]) -> list[Message]:
    """The messages of ``current`` that are not already in ``earlier`` (the previous step's
    request and answer): the turn's new input. An agent that rewrote its history gets
    its whole request back."""
    n = 0
    while n < len(earlier) and n < len(current) and _same(earlier[n], current[n]):
        n += 1
    return list(current[n:]) if n == len(earlier) else list(current)


def _same(a: Message, b: Message) -> bool:
    return (a.role, a.text.strip(), [c.name for c in a.tool_calls]) == (
        b.role,
        b.text.strip(),
        [c.name for c in b.tool_calls],
    )


def _token_texts(api: str, response: Any, n: int) -> list[str]:
    """The text of each sampled token when the answer carries it (chat and completions
    logprobs), else ''s."""
    texts: list[str] = []
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        first = (response["choices"] or [{}])[0] or {}
        lp = first.get("logprobs") or {}
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            texts = [str(t.get("token", "")) for t in lp["content"] if isinstance(t, dict)]
        elif isinstance(lp, dict) and isinstance(lp.get("tokens"), list):
            texts = [str(t) for t in lp["tokens"]]
    return texts if len(texts) == n else [""] * n


def tokens(
    api: str,
    response: Any,
    token_ids: Sequence[int],
    logprobs: Sequence[float],
    decode: Callable[[int], str] | None = None,
) -> list[Token]:
    """The sampled tokens of a step, each with its text (the answer's, else ``decode``'s;
    '' when neither knows it) and logprob."""
    ids = [int(i) for i in token_ids]
    lps: list[float | None] = (
        [float(x) for x in logprobs] if len(logprobs) == len(ids) else [None] * len(ids)
    )
    texts = _token_texts(api, response, len(ids))
    if decode is not None and not any(texts):
        texts = [decode(i) for i in ids]
    return [Token(i, t, lp) for i, t, lp in zip(ids, texts, lps, strict=True)]
