"""What every API adapter returns: the parsed upstream answer, ready to capture."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rllm.schemas.types import Usage

__all__ = ["Parsed", "sse", "usage_of"]


@dataclass
class Parsed:
    """An upstream answer: what the client gets and what the step captures."""

    client: Any
    """The response body for the client (capture-only fields stripped)."""
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def usage_of(data: Any, prompt_ids: list[int] | None, response_ids: list[int] | None) -> Usage:
    """Usage from an OpenAI ``usage`` object, else counted from the token arrays."""
    if isinstance(data, dict):
        cached = (data.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return Usage(
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cached_tokens=int(cached),
        )
    return Usage(prompt_tokens=len(prompt_ids or ()), completion_tokens=len(response_ids or ()))


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event."""
    import json

    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {body}\n\n".encode()
