"""Per-request timing: the gateway's app stamps a request's arrival and, at the last byte of
its answer, records the time the gateway added (the whole request minus the upstream's
time) in ``rllm_gateway_added_latency_seconds``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.types import Message, Scope, Send

__all__ = ["Timing", "clocked", "timing_of"]

_KEY = "rllm_timing"


@dataclass
class Timing:
    """When one request arrived and how long its upstream call took."""

    arrived: float
    """``time.perf_counter()`` when the request reached the gateway's app."""
    upstream_s: float = 0.0
    """Seconds spent waiting on the upstream (set by the call)."""
    call: bool = False
    """Whether the request was an LLM call (only those are measured)."""


def timing_of(request: Request) -> Timing | None:
    """The request's timing, if the clock middleware stamped it."""
    state: dict[str, Any] = request.scope.get("state") or {}
    timing = state.get(_KEY)
    return timing if isinstance(timing, Timing) else None


def clocked(scope: Scope, send: Send) -> Send:
    """Stamp an HTTP request's arrival in its scope; the returned ``send`` observes the
    added time once the last byte of an LLM call's answer is sent."""
    timing = Timing(arrived=time.perf_counter())
    scope.setdefault("state", {})[_KEY] = timing

    async def timed_send(message: Message) -> None:
        await send(message)
        last = message["type"] == "http.response.body" and not message.get("more_body")
        if last and timing.call:
            added = time.perf_counter() - timing.arrived - timing.upstream_s
            gw = getattr(scope["app"].state, "gw", None)
            if gw is not None:
                gw.metrics.observe("rllm_gateway_added_latency_seconds", max(added, 0.0))

    return timed_send
