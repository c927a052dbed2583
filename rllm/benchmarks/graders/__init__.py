"""Built-in reward functions; importing a module registers its functions by name."""

from __future__ import annotations

__all__: list[str] = []
