"""Anthropic Messages over a chat-completions upstream: translate the request (system,
text, tool_use, tool_result), and the answer back; ``anthropic_stream`` translates streams."""

from __future__ import annotations

import json
import uuid
from typing import Any

from rllm.producers.gateway.adapters.base import renamed
from rllm.producers.gateway.errors import UnreadableRequestError
from rllm.producers.gateway.types import Parsed

__all__ = ["dropped", "from_chat", "to_chat"]

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_SAMPLING = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop_sequences": "stop",
}
"""The request's sampling fields, by their chat-completions names."""
_SENT = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
    }
)
"""The request fields the chat-completions request carries (translated)."""


def dropped(body: dict[str, Any]) -> list[str]:
    """The request's fields a chat-completions upstream is not sent, sorted (Claude Code
    sends ``thinking``, ``context_management``, ``output_config`` and ``metadata``)."""
    return sorted(k for k in body if k not in _SENT)


def _tool_choice(choice: Any) -> Any:
    """The chat ``tool_choice`` of an Anthropic one (``auto``, ``any``, ``tool``, ``none``)."""
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        return {"type": "function", "function": {"name": choice["name"]}}
    if kind in ("auto", "any", "none"):
        return {"auto": "auto", "any": "required", "none": "none"}[kind]
    raise UnreadableRequestError(f"tool_choice must be auto, any, tool or none, got {choice!r:.80}")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    raise UnreadableRequestError(
        f"content must be a string or a list of blocks, got {type(content).__name__}"
    )


def _text(blocks: list[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request for an Anthropic Messages request."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append(
            {
                "role": "system",
                "content": system if isinstance(system, str) else _text(_blocks(system)),
            }
        )
    for m in body["messages"]:
        blocks = _blocks(m["content"])
        kinds = {str(b.get("type")) for b in blocks}
        if not kinds <= {"text", "tool_use", "tool_result"}:
            raise UnreadableRequestError(
                f"content block types {sorted(kinds - {'text', 'tool_use', 'tool_result'})}"
                " are not supported"
            )
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": _text(blocks) or None}
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                content = b.get("content", "")
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": b["tool_use_id"],
                        "content": content if isinstance(content, str) else _text(_blocks(content)),
                    }
                )
        text = _text(blocks)
        if text or "tool_result" not in kinds:
            messages.append({"role": m["role"], "content": text})
    chat: dict[str, Any] = {"model": body["model"], "messages": messages}
    if body.get("tools"):
        chat["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {}),
                },
            }
            for t in body["tools"]
        ]
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
        if body["tool_choice"].get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
    chat.update(renamed(body, _SAMPLING))
    return chat


def from_chat(body: dict[str, Any], parsed: Parsed) -> dict[str, Any]:
    """The Anthropic Messages answer for a chat completion."""
    content: list[dict[str, Any]] = []
    if parsed.text:
        content.append({"type": "text", "text": parsed.text})
    for call in parsed.tool_calls:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {"_raw": fn.get("arguments")}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
                "name": fn.get("name", ""),
                "input": args,
            }
        )
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": _STOP.get(parsed.finish_reason or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": parsed.usage.prompt_tokens,
            "output_tokens": parsed.usage.completion_tokens,
        },
    }
