"""Per-request timing: the gateway's app stamps each request's arrival, from which a call's
``overhead_ms`` (and ``rllm_gateway_added_latency_seconds``, the same figure) is counted."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.types import Scope

__all__ = ["Timing", "stamp", "timing_of"]

_KEY = "rllm_timing"


@dataclass
class Timing:
    """When one request arrived."""

    arrived: float
    """``time.perf_counter()`` when the request reached the gateway's app."""


def timing_of(request: Request) -> Timing | None:
    """The request's timing, if the app stamped it."""
    state: dict[str, Any] = request.scope.get("state") or {}
    timing = state.get(_KEY)
    return timing if isinstance(timing, Timing) else None


def stamp(scope: Scope) -> None:
    """Stamp an HTTP request's arrival in its scope."""
    scope.setdefault("state", {})[_KEY] = Timing(arrived=time.perf_counter())
