"""OpenAI Responses API over a chat-completions upstream: translate the request, and the
answer back (text and function calls); ``responses_stream`` translates streams."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from rllm.producers.gateway.adapters.base import renamed
from rllm.producers.gateway.errors import UnreadableRequestError
from rllm.producers.gateway.types import Parsed

__all__ = ["dropped", "from_chat", "to_chat"]

_SAMPLING = {"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"}
"""The request's sampling fields, by their chat-completions names."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise UnreadableRequestError(
        f"content must be a string or a list of parts, got {type(content).__name__}"
    )


def _tool_label(tool: dict[str, Any]) -> str:
    name = tool.get("name")
    return f"{tool.get('type')}:{name}" if isinstance(name, str) else str(tool.get("type"))


def dropped(body: dict[str, Any]) -> list[str]:
    """The request's tools a chat-completions upstream cannot run, as ``tools:TYPE`` or
    ``tools:TYPE:NAME`` (Codex sends ``namespace`` and ``web_search`` tools), sorted."""
    given = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    return sorted({f"tools:{_tool_label(t)}" for t in given if t.get("type") != "function"})


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request for a Responses request."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": _text(item["content"])})
        elif kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item.get("arguments", "{}")},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item["call_id"],
                    "content": output if isinstance(output, str) else json.dumps(output),
                }
            )
        else:
            raise UnreadableRequestError(f"input item type {kind!r} is not supported")
    chat: dict[str, Any] = {"model": body["model"], "messages": messages}
    given = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    tools = [
        {
            "type": "function",
            "function": {k: t[k] for k in ("name", "description", "parameters") if k in t},
        }
        for t in given
        if t.get("type") == "function"
    ]
    if tools:
        chat["tools"] = tools
    chat.update(renamed(body, _SAMPLING))
    return chat


def from_chat(body: dict[str, Any], parsed: Parsed) -> dict[str, Any]:
    """The Responses answer for a chat completion."""
    output: list[dict[str, Any]] = []
    if parsed.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": parsed.text, "annotations": []}],
            }
        )
    for call in parsed.tool_calls:
        fn = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex}",
                "call_id": call.get("id") or f"call_{uuid.uuid4().hex}",
                "name": fn.get("name", ""),
                "arguments": fn.get("arguments", "{}"),
                "status": "completed",
            }
        )
    u = parsed.usage
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if parsed.finish_reason == "length" else "completed",
        "model": body.get("model"),
        "output": output,
        "error": None,
        "incomplete_details": (
            {"reason": "max_output_tokens"} if parsed.finish_reason == "length" else None
        ),
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "usage": {
            "input_tokens": u.prompt_tokens,
            "output_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
