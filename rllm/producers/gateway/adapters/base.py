"""The token capture the OpenAI-shaped adapters share: what the client asked for, and
stripping the token IDs and logprobs the gateway asked for on its own behalf. What every
adapter returns, ``Parsed``, is in ``rllm.producers.gateway.types``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rllm.errors import RllmError
from rllm.producers.gateway.types import Parsed, Sample
from rllm.schemas.types import Usage

__all__ = [
    "asked_ids",
    "asked_logprobs",
    "capture_choices",
    "first_choice",
    "renamed",
    "sse",
    "strip_capture",
    "usage_of",
    "with_capture",
]


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


def asked_ids(body: dict[str, Any]) -> bool:
    """Whether the client itself asked for token IDs."""
    return bool(body.get("return_token_ids"))


def asked_logprobs(body: dict[str, Any]) -> bool:
    """Whether the client itself asked for logprobs."""
    lp = body.get("logprobs")
    return lp is not None and lp is not False


def with_capture(body: dict[str, Any], capture: bool, **asks: Any) -> dict[str, Any]:
    """The upstream body: the client's, plus the ``asks`` that capture needs."""
    return {**body, **asks} if capture else body


def strip_capture(
    choice: dict[str, Any], body: dict[str, Any], answer: dict[str, Any] | None = None
) -> None:
    """Remove from one choice (and from ``answer``, its top level, when given) the token IDs
    and logprobs that were asked for capture only, not by the client's ``body``."""
    if not asked_ids(body):
        if answer is not None:
            answer.pop("prompt_token_ids", None)
        choice.pop("token_ids", None)
        choice.pop("prompt_token_ids", None)
    if not asked_logprobs(body) and "logprobs" in choice:
        choice["logprobs"] = None


def first_choice(data: Any) -> dict[str, Any]:
    """The first choice of an OpenAI chat or completion answer.

    Raises:
        RllmError: the upstream answer has no choices.
    """
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("choices"), list)
        or not data["choices"]
    ):
        raise RllmError("upstream answer has no choices")
    choice: dict[str, Any] = data["choices"][0]
    return choice


def capture_choices(
    body: dict[str, Any],
    data: dict[str, Any],
    *,
    prompt_ids: list[int] | None,
    logprobs: list[float] | None,
    text: str,
    tool_calls: list[dict[str, Any]] | None = None,
    strip_top: bool = True,
    logprobs_of: Callable[[dict[str, Any]], list[float] | None] | None = None,
) -> Parsed:
    """The capture of a whole (non-streamed) OpenAI answer, then every choice stripped for
    the client.

    Args:
        body: the client's request (what it asked for itself).
        data: the upstream answer; it becomes ``Parsed.client`` and is stripped in place.
        prompt_ids: the prompt's token IDs, read by the caller.
        logprobs: the first choice's per-token logprobs, read by the caller.
        text: the first choice's answer text.
        tool_calls: the first choice's tool calls.
        strip_top: also strip the answer's top-level ``prompt_token_ids``.
        logprobs_of: reads one choice's logprobs (for the choices after the first).

    Returns:
        The parsed answer: response token IDs, finish reason and usage from the first choice,
        every other choice in ``more``.
    """
    choice = data["choices"][0]
    response_ids = choice.get("token_ids")
    parsed = Parsed(
        client=data,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
        usage=usage_of(data.get("usage"), prompt_ids, response_ids),
        text=text,
        tool_calls=list(tool_calls or []),
        more=[
            Sample(
                choice=c,
                response_ids=c.get("token_ids"),
                logprobs=logprobs_of(c) if logprobs_of is not None else None,
                finish_reason=c.get("finish_reason"),
            )
            for c in data["choices"][1:]
            if isinstance(c, dict)
        ],
    )
    for c in data["choices"]:
        strip_capture(c, body, data if strip_top else None)
    return parsed


def renamed(body: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The fields of ``body`` that ``names`` maps and that are set (not None), under the
    names it maps them to (a later one wins where two map to one name)."""
    return {dst: body[src] for src, dst in names.items() if body.get(src) is not None}


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event."""
    import json

    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {body}\n\n".encode()
