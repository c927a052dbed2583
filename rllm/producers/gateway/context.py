"""What the upstream's context leaves for an answer: a call whose ``max_tokens`` is over it
is sent with the rest of the context instead (and its step records from what), so an agent
that asks for more than a small model holds (Claude Code's 32,000) gets an answer, not the
upstream's refusal.

The context length is the upstream's ``max_model_len`` on ``GET /v1/models`` (vLLM, SGLang,
the local model server), asked once. The prompt's length is known for an sglang upstream
(the gateway tokenizes); otherwise it is asked from the upstream's ``POST /tokenize`` (vLLM
takes chat messages, the local model server a completion prompt) when the answer could reach
the end of the context. Where nothing tells it, ``max_tokens`` is cut to the whole context.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from rllm.producers.gateway.upstreams import Upstream

__all__ = ["MAX_TOKENS_KEYS", "Clamp", "ContextWindow", "clamp_max_tokens"]

log = logging.getLogger("rllm.gateway")

MAX_TOKENS_KEYS = ("max_completion_tokens", "max_tokens")
"""Where an upstream (chat or completions) request asks for its answer's length."""


@dataclass(frozen=True)
class Clamp:
    """A ``max_tokens`` the gateway lowered to what the context leaves."""

    asked: int
    """What the agent asked for."""
    sent: int
    """What the upstream was asked for."""
    context: int
    """The upstream's context length (``max_model_len``)."""
    prompt_tokens: int | None
    """The prompt's length, when it was known (else the whole context was the limit)."""

    def note(self) -> dict[str, int | None]:
        """The step's record of it (``max_tokens_clamped`` in its sampling parameters)."""
        return {
            "from": self.asked,
            "to": self.sent,
            "max_model_len": self.context,
            "prompt_tokens": self.prompt_tokens,
        }


def _asked(body: dict[str, Any]) -> tuple[str, int] | None:
    for key in MAX_TOKENS_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return key, value
    return None


def clamp_max_tokens(
    body: dict[str, Any], context: int, prompt_tokens: int | None
) -> tuple[dict[str, Any], Clamp | None]:
    """``body`` with its ``max_tokens`` (or ``max_completion_tokens``) cut to what the
    context leaves after the prompt (the whole context when the prompt's length is not
    known, at least 1), and the clamp; ``body`` itself and None when it fits."""
    asked = _asked(body)
    if asked is None:
        return body, None
    key, value = asked
    room = max(context - (prompt_tokens or 0), 1)
    if value <= room:
        return body, None
    return {**body, key: room}, Clamp(value, room, context, prompt_tokens)


class ContextWindow:
    """The upstream's context length and prompt lengths, asked when a call needs them.

    Args:
        upstream: the upstream to ask.
        retry_s: how long an unanswered ``/v1/models`` is not asked again.
    """

    def __init__(self, upstream: Upstream, retry_s: float = 10.0) -> None:
        self.upstream = upstream
        self.retry_s = retry_s
        self.length: int | None = None
        """``max_model_len`` (None: not known yet, or the upstream does not say)."""
        self._asked_at = -retry_s
        self._lock = asyncio.Lock()
        self._tokenizes: dict[bool, bool] = {}
        """Whether ``POST /tokenize`` answers chat (True) or completion (False) prompts."""

    async def context(self) -> int | None:
        """The upstream's ``max_model_len`` (asked once, then again only after a failure
        and ``retry_s``)."""
        if self.length is not None or time.monotonic() - self._asked_at < self.retry_s:
            return self.length
        async with self._lock:
            if self.length is None and time.monotonic() - self._asked_at >= self.retry_s:
                self._asked_at = time.monotonic()
                self.length = await self._ask_models()
        return self.length

    async def _ask_models(self) -> int | None:
        try:
            resp = await self.upstream.client.get("/v1/models", timeout=5.0)
            data = resp.json().get("data") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        for model in data if isinstance(data, list) else []:
            length = model.get("max_model_len") if isinstance(model, dict) else None
            if isinstance(length, int) and not isinstance(length, bool) and length > 0:
                log.info("upstream %s: context of %d tokens", self.upstream.url, length)
                return length
        return None

    async def prompt_tokens(self, body: dict[str, Any], chat: bool) -> int | None:
        """The prompt's length from the upstream's ``POST /tokenize`` (None when it does
        not answer it; then it is not asked again for this kind of prompt)."""
        if self._tokenizes.get(chat) is False:
            return None
        ask: dict[str, Any] = {"model": body.get("model")}
        if chat:
            ask.update(messages=body.get("messages"), add_generation_prompt=True)
            if body.get("tools"):
                ask["tools"] = body["tools"]
        elif isinstance(body.get("prompt"), str):
            ask["prompt"] = body["prompt"]
        else:
            return None
        try:
            resp = await self.upstream.client.post("/tokenize", json=ask, timeout=10.0)
            count = resp.json().get("count") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            count = None
        if not isinstance(count, int) or isinstance(count, bool):
            self._tokenizes[chat] = False
            return None
        self._tokenizes[chat] = True
        return count

    async def fit(
        self, body: dict[str, Any], chat: bool, prompt_tokens: int | None, estimate: int
    ) -> tuple[dict[str, Any], Clamp | None]:
        """``body`` with ``max_tokens`` cut to what the context leaves, and the clamp.

        Args:
            body: the upstream request (chat or completions).
            chat: whether it is a chat request.
            prompt_tokens: the prompt's length, when the gateway knows it.
            estimate: the session's last sequence length: when it and ``max_tokens``
                together are over half the context, the prompt's length is asked.
        """
        asked = _asked(body)
        if asked is None:
            return body, None
        context = await self.context()
        if context is None:
            return body, None
        if prompt_tokens is None and asked[1] + estimate > context // 2:
            prompt_tokens = await self.prompt_tokens(body, chat)
        return clamp_max_tokens(body, context, prompt_tokens)
