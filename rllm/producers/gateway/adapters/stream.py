"""Streams to the client, chunk by chunk: what every API's stream encoder does, the OpenAI
encoder (chat and completions chunks relayed as they come), and a whole answer cut into
chunks (for a model server that does not stream)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from rllm.producers.gateway.adapters.base import sse
from rllm.producers.gateway.types import Parsed

__all__ = [
    "DONE",
    "OpenAIStream",
    "StreamEncoder",
    "TranslatedStream",
    "as_chunks",
    "first_choice_deltas",
]

DONE = b"data: [DONE]\n\n"
"""The OpenAI stream's last event."""


class StreamEncoder(Protocol):
    """Turns OpenAI chat (or completion) chunks into one API's stream events, as they come.

    Each chunk reaches ``feed`` after the capture read and stripped it; ``finish`` closes the
    stream once the upstream finished, ``fail`` ends it with an error event instead.
    """

    def feed(self, chunk: dict[str, Any]) -> list[bytes]:
        """The events for one upstream chunk (none, one or several)."""
        ...

    def finish(self, parsed: Parsed) -> tuple[list[bytes], Any]:
        """The closing events, and the whole answer in this API's shape (what the step
        captures as its response)."""
        ...

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """The events that end a stream broken by ``kind`` (an upstream failure, say)."""
        ...


class OpenAIStream:
    """Chat or completions chunks relayed as they come, then ``[DONE]``.

    Args:
        usage: the client asked for usage (``stream_options.include_usage``); without it
            the usage chunk the gateway asked for on its own behalf is not relayed.
    """

    def __init__(self, usage: bool) -> None:
        self.usage = usage

    def feed(self, chunk: dict[str, Any]) -> list[bytes]:
        """The chunk as one event (a usage chunk only when the client asked for usage)."""
        if not self.usage:
            if not chunk.get("choices"):
                return []
            chunk.pop("usage", None)
        return [sse(chunk)]

    def finish(self, parsed: Parsed) -> tuple[list[bytes], Any]:
        """``[DONE]``; the answer is the assembled chat completion or completion."""
        return [DONE], parsed.client

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """An OpenAI error object as an event (the ``openai`` client raises ``APIError``)."""
        return [sse({"error": {"message": message, "type": kind, "code": status}})]


class TranslatedStream(ABC):
    """A stream encoder for an API whose events are not OpenAI's (Anthropic Messages,
    Responses): choice 0's text and tool call deltas become that API's events, after the
    opening ones."""

    @abstractmethod
    def _start(self) -> list[bytes]:
        """The opening events, the first time (then none)."""

    @abstractmethod
    def _text(self, text: str) -> list[bytes]:
        """The events for a text delta."""

    @abstractmethod
    def _call(self, call: dict[str, Any]) -> list[bytes]:
        """The events for a tool call delta."""

    def feed(self, chunk: dict[str, Any]) -> list[bytes]:
        """Text and tool call deltas of choice 0 as this API's events."""
        out = self._start()
        for text, calls in first_choice_deltas(chunk):
            if text:
                out += self._text(text)
            for call in calls:
                out += self._call(call)
        return out


def first_choice_deltas(chunk: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Choice 0's ``(text, tool call deltas)`` in a chat-completions chunk (the other
    choices' deltas are captured as their own steps, not translated)."""
    out = []
    for choice in chunk.get("choices") or []:
        if choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        out.append((str(delta.get("content") or ""), list(delta.get("tool_calls") or [])))
    return out


def as_chunks(data: dict[str, Any], chat: bool) -> list[dict[str, Any]]:
    """A whole (non-streamed) chat completion or completion, with its capture fields, as
    the stream chunks that carry the same answer: one chunk per choice, then usage."""
    head = {k: data.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk" if chat else "text_completion"
    chunks: list[dict[str, Any]] = []
    for choice in data.get("choices") or []:
        part: dict[str, Any] = {
            k: choice[k]
            for k in ("index", "logprobs", "token_ids", "prompt_token_ids", "finish_reason")
            if k in choice
        }
        if chat:
            message = choice.get("message") or {}
            delta = {k: v for k, v in message.items() if v is not None and k != "tool_calls"}
            calls = message.get("tool_calls") or []
            if calls:
                delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
            part["delta"] = delta
        else:
            part["text"] = choice.get("text") or ""
        chunks.append({**head, "choices": [part]})
    if chunks and data.get("prompt_token_ids") is not None:
        chunks[0]["prompt_token_ids"] = data["prompt_token_ids"]
    if data.get("usage"):
        chunks.append({**head, "choices": [], "usage": data["usage"]})
    return chunks
