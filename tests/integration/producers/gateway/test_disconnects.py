"""A client that goes away is not served (issue 17, defect 8): the gateway cancels its
upstream request, the local model server drops the abandoned rows, the call is recorded as
a failed step, and the session is closed by its idle timeout; a session is never closed
under a call it is still serving."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest

from rllm.schemas.types import SessionClosed, SessionStatus, StepCaptured
from rllm.serving.app import create_app as serving_app
from rllm.serving.engine import Completion
from rllm.serving.sampling import SamplingParams
from tests.fakes.engine import EngineDouble
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, ADMIN_KEY, Events


class _Tokenizer:
    def decode(self, ids: list[int], **_: Any) -> str:
        return "x" * len(ids)


class SlowEngine(EngineDouble):
    """Takes ``seconds`` per batch unless every row's stop event is set first."""

    tokenizer = _Tokenizer()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.batches: list[list[list[int]]] = []

    def generate(
        self,
        prompts: list[list[int]],
        params: list[SamplingParams],
        stop: Sequence[threading.Event],
    ) -> list[Completion]:
        """Called by the model server's batcher, which passes every row's stop event."""
        self.batches.append([list(p) for p in prompts])
        self.started.set()
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            if all(s.is_set() for s in stop):
                self.stopped.set()
                break
            time.sleep(0.01)
        return [Completion(token_ids=[5, 6], logprobs=[-0.1, -0.2], text="xx") for _ in prompts]


def _serve(engine: SlowEngine) -> ThreadedServer:
    return ThreadedServer(serving_app(engine, "m", batch_wait_ms=1), lifespan="on")  # type: ignore[arg-type]  # a stand-in engine with only what serving_app calls


@pytest.fixture
def servers() -> Iterator[list[ThreadedServer]]:
    started: list[ThreadedServer] = []
    yield started
    for server in started:
        server.stop()


def _send_then_leave(url: str, path: str, body: dict[str, Any], leave: threading.Event) -> None:
    """POST ``body`` on a raw connection and close it, unanswered, once ``leave`` is set."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN_KEY}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        assert leave.wait(10)


def _wait(what: str, check: Callable[[], bool], timeout_s: float = 8.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _closed_on_topic(session_events: Events) -> None:
    """Wait for a SessionClosed on the topic: the gateway forgets a session (so /health no
    longer counts it) before its SessionClosed is acknowledged."""
    _wait(
        "no SessionClosed on the topic",
        lambda: any(isinstance(e.payload, SessionClosed) for _, e in session_events()),
        timeout_s=30,
    )


def test_a_client_that_goes_away_cancels_the_upstream_and_its_session_times_out(
    start_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    servers: list[ThreadedServer],
) -> None:
    engine = SlowEngine(seconds=30)
    servers.append(model := _serve(engine))
    gw = start_gateway(upstream_url=model.url, idle_timeout_s=0.5)
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 50}
    t0 = time.monotonic()
    _send_then_leave(gw.url, "/sessions/gone/v1/completions", body, engine.started)
    # the gateway cancelled its upstream request; the model server stopped the rows
    assert engine.stopped.wait(5), "the model server kept generating for a client that left"
    assert time.monotonic() - t0 < 10
    _wait(
        "the abandoned session was never closed",
        lambda: httpx.get(f"{gw.url}/health").json()["open_sessions"] == 0,
    )
    _closed_on_topic(session_events)
    events = [e.payload for _, e in session_events() if e.session_id == "gone"]
    steps = [p for p in events if isinstance(p, StepCaptured)]
    assert len(steps) == 1 and steps[0].error is not None
    assert steps[0].error.kind == "client_disconnected"
    closed = events[-1]
    assert isinstance(closed, SessionClosed)
    assert closed.status is SessionStatus.TIMEOUT and closed.num_steps == 1
    metrics = httpx.get(f"{gw.url}/metrics").text
    assert 'rllm_gateway_cancelled_total{api="completions"} 1' in metrics


def test_a_session_is_not_closed_under_a_call_in_flight(
    start_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    servers: list[ThreadedServer],
) -> None:
    servers.append(model := _serve(SlowEngine(seconds=1.5)))
    gw = start_gateway(upstream_url=model.url, idle_timeout_s=0.3)
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 2}
    r = httpx.post(f"{gw.url}/sessions/long/v1/completions", json=body, headers=ADMIN, timeout=20)
    assert r.status_code == 200, r.text
    _wait(
        "the idle session was never closed",
        lambda: httpx.get(f"{gw.url}/health").json()["open_sessions"] == 0,
    )
    _closed_on_topic(session_events)
    events = [e.payload for _, e in session_events() if e.session_id == "long"]
    kinds = [type(p).__name__ for p in events]
    assert kinds == ["SessionOpened", "StepCaptured", "SessionClosed"], kinds
    closed = events[-1]
    assert isinstance(closed, SessionClosed) and closed.num_steps == 1
    assert closed.status is SessionStatus.TIMEOUT


def test_the_model_server_drops_a_queued_request_whose_client_left(
    servers: list[ThreadedServer],
) -> None:
    engine = SlowEngine(seconds=1.0)
    servers.append(model := _serve(engine))
    first = threading.Thread(
        target=lambda: httpx.post(
            f"{model.url}/v1/completions", json={"model": "m", "prompt": [1]}, timeout=20
        )
    )
    first.start()
    assert engine.started.wait(5)
    left = threading.Event()
    left.set()
    _send_then_leave(model.url, "/v1/completions", {"model": "m", "prompt": [2]}, left)
    r = httpx.post(f"{model.url}/v1/completions", json={"model": "m", "prompt": [3]}, timeout=20)
    first.join(20)
    assert r.status_code == 200
    assert [2] not in [p for batch in engine.batches for p in batch], engine.batches
    assert engine.batches[0] == [[1]] and [3] in engine.batches[-1]
