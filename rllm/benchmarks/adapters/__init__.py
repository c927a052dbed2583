"""Row adapters: named functions deriving template variables from a row's mapped fields.

An adapter takes the variables read through a spec's field mapping and returns new or
replaced ones (a lettered choice list, a numeric answer, a test program). It raises
``DatasetRowError`` naming the variable when a value is unusable; the loader adds the row index.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

from rllm.benchmarks.errors import DatasetRowError

__all__ = [
    "ADAPTERS",
    "adapter",
    "as_list",
    "choices_vars",
    "code",
    "last_boxed",
    "letter",
    "lettered",
    "shuffled",
    "text",
    "vision",
]

Vars = dict[str, Any]
ADAPTERS: dict[str, Callable[[Vars], Vars]] = {}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def adapter(name: str) -> Callable[[Callable[[Vars], Vars]], Callable[[Vars], Vars]]:
    """Register an adapter under ``name`` (decorator)."""

    def decorate(fn: Callable[[Vars], Vars]) -> Callable[[Vars], Vars]:
        ADAPTERS[name] = fn
        return fn

    return decorate


def letter(index: int) -> str:
    """``0 -> 'A'``."""
    return LETTERS[index]


def lettered(choices: list[Any]) -> str:
    """``['x', 'y'] -> 'A. x\\nB. y'``."""
    return "\n".join(f"{letter(i)}. {c}" for i, c in enumerate(choices))


def choices_vars(vars_: Vars, choices: list[Any], answer_index: int) -> Vars:
    """The ``choices``, ``choices_text`` (lettered) and ``answer`` (letter) variables."""
    if not 0 <= answer_index < len(choices):
        raise DatasetRowError(f"answer index {answer_index} is outside the {len(choices)} choices")
    return {
        "choices": [str(c) for c in choices],
        "choices_text": lettered(choices),
        "answer": letter(answer_index),
    }


def as_list(value: Any, name: str) -> list[Any]:
    """A list field, also when stored as its Python or JSON text (``"['a', 'b']"``)."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            value = json.loads(value)
    if not isinstance(value, list | tuple):
        raise DatasetRowError(f"field {name!r} should be a list, got {type(value).__name__}")
    return list(value)


def shuffled(seed_text: str, items: list[Any]) -> list[Any]:
    """``items`` in an order fixed by ``seed_text`` (the same on every machine)."""
    seed = int(hashlib.sha256(seed_text.encode()).hexdigest()[:16], 16)
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


# Importing the modules registers their adapters (they import the helpers above).
from rllm.benchmarks.adapters import code, text, vision  # noqa: E402
from rllm.benchmarks.adapters.text import last_boxed  # noqa: E402
