"""The gateway's self-reported added time counts from the request's arrival: a body that
takes 0.3 s to arrive shows in the step's ``overhead_ms``, and the added-latency metric is
the same figure (one definition, not a second clock that also spans the ack and send)."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from rllm.schemas.types import StepCaptured
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN_KEY, Events

PAUSE_S = 0.3


def _post_slowly(url: str, path: str, body: bytes) -> bytes:
    """POST ``body`` in two halves with a pause between; return the raw answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            f"authorization: Bearer {ADMIN_KEY}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body[:10])
        time.sleep(PAUSE_S)
        sock.sendall(body[10:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _added(url: str) -> tuple[float, int]:
    text = httpx.get(f"{url}/metrics").text
    total = re.search(r"^rllm_gateway_added_latency_seconds_sum (\S+)$", text, re.M)
    count = re.search(r"^rllm_gateway_added_latency_seconds_count (\S+)$", text, re.M)
    return (float(total[1]) if total else 0.0, int(count[1]) if count else 0)


def test_overhead_counts_from_the_requests_arrival(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    answer = _post_slowly(gw.url, "/sessions/slow/v1/chat/completions", body)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    deadline = time.monotonic() + 5
    while _added(gw.url)[1] < 1:
        assert time.monotonic() < deadline, "the added latency was never observed"
        time.sleep(0.05)
    total_s, count = _added(gw.url)
    assert count == 1 and total_s >= PAUSE_S * 0.9
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert len(steps) == 1
    assert steps[0].overhead_ms >= PAUSE_S * 1000 * 0.9
    assert total_s * 1000 == pytest.approx(steps[0].overhead_ms, abs=0.002)  # 6 decimals
    # a gateway request that is not an LLM call is not counted
    assert httpx.get(f"{gw.url}/health").status_code == 200
    assert _added(gw.url)[1] == 1
