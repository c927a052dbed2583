"""API adapters: chat, completions (native), responses and anthropic (translated to chat),
and the stream encoders that turn chat chunks into each API's events as they come."""

from __future__ import annotations

from rllm.producers.gateway.adapters import (
    anthropic,
    anthropic_stream,
    chat,
    completions,
    responses,
    responses_stream,
    stream,
)

__all__ = [
    "anthropic",
    "anthropic_stream",
    "chat",
    "completions",
    "responses",
    "responses_stream",
    "stream",
]
