"""The bounds of an OpenAI request's sampling parameters, in one place: the local model
server answers a value outside them with a 400, and a run refuses it before its first
rollout (where every call would get that 400)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TEMPERATURE_MAX", "TOP_P_MIN", "sampling_problem"]

TEMPERATURE_MAX = 100.0
"""Largest temperature served (0 is greedy)."""
TOP_P_MIN = 1e-9
"""Smallest top_p served: top_p is in (0, 1]."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def sampling_problem(sampling: Mapping[str, Any]) -> str | None:
    """What is wrong with ``sampling`` (``temperature``, ``top_p``, ``top_k``,
    ``max_tokens``, ``n``), naming the first bad field and its value; None when nothing is."""
    temperature = sampling.get("temperature")
    if temperature is not None and not (
        _number(temperature) and 0 <= temperature <= TEMPERATURE_MAX
    ):
        return f"temperature={temperature!r} must be a number in [0, {TEMPERATURE_MAX:g}]"
    top_p = sampling.get("top_p")
    if top_p is not None and not (_number(top_p) and TOP_P_MIN <= top_p <= 1):
        return f"top_p={top_p!r} must be a number in (0, 1]"
    top_k = sampling.get("top_k")
    if top_k is not None and not (
        isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= -1
    ):
        return f"top_k={top_k!r} must be an integer, -1 or 0 for no limit"
    for name in ("max_tokens", "max_completion_tokens", "n"):
        value = sampling.get(name)
        if value is not None and not (
            isinstance(value, int) and not isinstance(value, bool) and value >= 1
        ):
            return f"{name}={value!r} must be a positive integer"
    return None
