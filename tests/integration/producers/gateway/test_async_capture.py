"""capture=async publishes a step ``publish_delay_ms`` after its answer (so the client reads
the answer before the gateway, librdkafka and the broker spend CPU on the event), yet a
session's steps keep their order and are all published before whatever reads or follows
them: its info, its close, a shutdown."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from rllm.schemas.types import SessionClosed, SessionEvent, StepCaptured
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, Events

_DELAY_MS = 1000.0
"""Longer than the calls and the close take here, so every check below runs while the
steps would still be waiting."""


def _chat(text: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 3}


def _calls(gw: ThreadedServer, sid: str, n: int) -> dict[str, str]:
    info = httpx.post(f"{gw.url}/sessions", json={"session_id": sid}, headers=ADMIN).json()
    key = {"authorization": f"Bearer {info['api_key']}"}
    for k in range(n):
        r = httpx.post(f"{info['base_url']}/chat/completions", json=_chat(f"turn {k}"), headers=key)
        assert r.status_code == 200, r.text
    return key


def _of(events: list[tuple[str, SessionEvent]], sid: str) -> list[SessionEvent]:
    return [e for _, e in events if e.session_id == sid]


def test_info_and_close_come_after_every_deferred_step(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(capture="async", publish_delay_ms=_DELAY_MS)
    key = _calls(gw, "deferred", 3)
    info = httpx.get(f"{gw.url}/sessions/deferred", headers=key).json()
    assert info["num_steps"] == 3
    closed = httpx.post(f"{gw.url}/sessions/deferred/close", json={}, headers=key)
    assert closed.status_code == 200 and closed.json()["num_steps"] == 3

    events = _of(session_events(), "deferred")
    kinds = [type(e.payload).__name__ for e in events]
    assert kinds == ["SessionOpened", *["StepCaptured"] * 3, "SessionClosed"]
    steps = [e.payload for e in events if isinstance(e.payload, StepCaptured)]
    assert [s.step_index for s in steps] == [0, 1, 2]
    last = events[-1].payload
    assert isinstance(last, SessionClosed) and last.num_steps == 3


def test_a_shutdown_publishes_the_steps_that_wait(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(capture="async", publish_delay_ms=_DELAY_MS)
    _calls(gw, "stopped", 2)
    gw.stop()  # at once: both steps are still deferred
    steps = [e.payload for e in _of(session_events(), "stopped")]
    assert [type(p).__name__ for p in steps] == ["SessionOpened", "StepCaptured", "StepCaptured"]
    assert [p.step_index for p in steps if isinstance(p, StepCaptured)] == [0, 1]
