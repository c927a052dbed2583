"""The real ``openai`` and ``anthropic`` clients as agents of the four APIs, streaming or not:
what a stream delivered, and when its first token arrived."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from tests.integration.producers.gateway.fixtures import ADMIN_KEY

APIS = ("chat", "completions", "responses", "anthropic")
"""The gateway's four APIs."""

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
"""A tool's parameters."""


@dataclass
class Streamed:
    """What a client read from one stream."""

    text: str = ""
    """The answer's text, its deltas joined."""
    deltas: int = 0
    """How many text deltas it came in."""
    first_at: float | None = None
    """``time.monotonic()`` when the first text delta arrived."""
    kinds: list[str] = field(default_factory=list)
    """Event types in order (Responses, Anthropic)."""
    events: list[Any] = field(default_factory=list)
    """The events (or chunks) as the client parsed them."""

    def took(self, text: str | None, event: Any, kind: str | None = None) -> None:
        """Note one event and its text delta."""
        self.events.append(event)
        if kind is not None:
            self.kinds.append(kind)
        if text:
            self.first_at = self.first_at or time.monotonic()
            self.text += text
            self.deltas += 1


def openai_client(gw: str, sid: str) -> openai.OpenAI:
    """An OpenAI client of session ``sid`` (no retries: every call is one step)."""
    return openai.OpenAI(
        base_url=f"{gw}/sessions/{sid}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=30
    )


def anthropic_client(gw: str, sid: str) -> anthropic.Anthropic:
    """An Anthropic client of session ``sid`` (no retries)."""
    return anthropic.Anthropic(
        base_url=f"{gw}/sessions/{sid}", api_key=ADMIN_KEY, max_retries=0, timeout=30
    )


def _tools(api: str, tools: bool) -> dict[str, Any]:
    if not tools:
        return {}
    if api == "responses":
        return {"tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER}]}
    if api == "anthropic":
        return {"tools": [{"name": "get_weather", "input_schema": WEATHER}]}
    return {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}


def call(
    gw: str,
    sid: str,
    api: str,
    *,
    stream: bool,
    model: str = "m",
    content: str = "hello world",
    max_tokens: int | None = None,
    tools: bool = False,
) -> Streamed | Any:
    """One call of ``api`` with ``content`` as the user's message (the prompt, for
    completions): the whole answer, or what its stream delivered (the stream is read to
    its end; an error event raises as the client raises it)."""
    extra = _tools(api, tools)
    if api == "anthropic":
        with anthropic_client(gw, sid) as claude:
            made = claude.messages.create(
                model=model,
                max_tokens=max_tokens or 64,
                messages=[{"role": "user", "content": content}],
                stream=stream,
                **extra,
            )
            return _read_anthropic(made) if stream else made
    limit = {} if max_tokens is None else {"max_tokens": max_tokens}
    with openai_client(gw, sid) as client:
        if api == "chat":
            messages = [{"role": "user", "content": content}]
            made = client.chat.completions.create(
                model=model, messages=messages, stream=stream, **limit, **extra
            )
        elif api == "completions":
            made = client.completions.create(model=model, prompt=content, stream=stream, **limit)
        else:
            if max_tokens is not None:
                limit = {"max_output_tokens": max_tokens}
            made = client.responses.create(
                model=model, input=content, stream=stream, **limit, **extra
            )
        return _read_openai(api, made) if stream else made


def _read_openai(api: str, stream: Any) -> Streamed:
    out = Streamed()
    for event in stream:
        if api == "responses":
            delta = event.delta if event.type == "response.output_text.delta" else None
            out.took(delta, event, event.type)
        elif api == "chat":
            out.took(event.choices[0].delta.content if event.choices else None, event)
        else:
            out.took(event.choices[0].text if event.choices else None, event)
    return out


def _read_anthropic(stream: Any) -> Streamed:
    out = Streamed()
    for event in stream:
        text = None
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text = event.delta.text
        out.took(text, event, event.type)
    return out
