"""API adapters: chat, completions (native), responses and anthropic (translated to chat)."""

from __future__ import annotations

from . import anthropic, chat, completions, responses

__all__ = ["anthropic", "chat", "completions", "responses"]
