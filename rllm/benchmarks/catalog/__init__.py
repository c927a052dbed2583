"""Declarative benchmark entries, one module per category; importing one registers it."""

from __future__ import annotations

__all__: list[str] = []
