"""Refusals that must cost nothing and say why: deep JSON, bad message items, short bodies,
untranslatable calls (no step index used), steps over the event limit (served, recorded
as failed), Anthropic-shaped errors, dropped Responses tools named in the log."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from rllm.schemas.types import (
    SessionClosed,
    StepCaptured,
    TokenStatus,
)
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, ADMIN_KEY, Events

CHAT = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
MSG = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
DEEP = b"[" * 50_000


def _steps(events: Events, sid: str) -> list[StepCaptured]:
    return [e.payload for k, e in events() if k == sid and isinstance(e.payload, StepCaptured)]


def _closed(events: Events, sid: str) -> SessionClosed:
    closed = [e.payload for k, e in events() if k == sid and isinstance(e.payload, SessionClosed)]
    assert len(closed) == 1
    return closed[0]


def test_deeply_nested_json_is_refused_400_on_every_json_endpoint(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    paths = [
        "/sessions",
        "/sessions/close",
        "/sessions/deep/close",
        "/sessions/deep/v1/chat/completions",
        "/sessions/deep/v1/completions",
        "/sessions/deep/v1/responses",
        "/v1/events",
        "/admin/policy",
        "/admin/pause",
    ]
    for path in paths:
        r = httpx.post(
            f"{gw.url}{path}", content=DEEP, headers={**ADMIN, "content-type": "application/json"}
        )
        assert r.status_code == 400, (path, r.status_code, r.text[:200])
        assert "nested too deeply" in r.json()["error"]["message"], path
    r = httpx.post(f"{gw.url}/sessions/deep/v1/messages", content=DEEP, headers=ADMIN)
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    assert "nested too deeply" in r.json()["error"]["message"]
    # refused before any work: no session was opened implicitly, nothing was published
    assert httpx.get(f"{gw.url}/health").json()["open_sessions"] == 0
    assert session_events() == []


def test_refused_translation_takes_no_step_index(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}
    bad_msg = {**MSG, "messages": [{"role": "user", "content": [image]}]}
    url = f"{gw.url}/sessions/anth/v1/messages"
    assert httpx.post(url, json=MSG, headers=ADMIN).status_code == 200
    r = httpx.post(url, json=bad_msg, headers=ADMIN)
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    assert "image" in r.json()["error"]["message"]
    assert httpx.post(url, json=MSG, headers=ADMIN).status_code == 200

    good = {"model": "m", "input": "hi"}
    bad = {"model": "m", "input": [{"type": "reasoning", "id": "rs_1", "summary": []}]}
    url = f"{gw.url}/sessions/resp/v1/responses"
    assert httpx.post(url, json=good, headers=ADMIN).status_code == 200
    r = httpx.post(url, json=bad, headers=ADMIN)
    assert r.status_code == 400 and "'reasoning'" in r.json()["error"]["message"]
    assert httpx.post(url, json=good, headers=ADMIN).status_code == 200

    for sid in ("anth", "resp"):
        assert (
            httpx.post(f"{gw.url}/sessions/{sid}/close", json={}, headers=ADMIN).json()["num_steps"]
            == 2
        )
        assert [s.step_index for s in _steps(session_events, sid)] == [0, 1]
        assert _closed(session_events, sid).num_steps == 2


def test_step_over_the_event_limit_is_served_and_recorded_as_a_failed_step(
    start_gateway: Callable[..., ThreadedServer], kafka: KafkaSettings, session_events: Events
) -> None:
    small = kafka.model_copy(update={"max_message_bytes": 4096})
    gw = start_gateway(kafka_settings=small)
    url = f"{gw.url}/sessions/big/v1/chat/completions"
    big = {"model": "m", "messages": [{"role": "user", "content": "y" * 6000}]}
    assert httpx.post(url, json=CHAT, headers=ADMIN).status_code == 200
    r = httpx.post(url, json=big, headers=ADMIN)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["choices"][0]["message"]["content"]  # the upstream's answer
    assert httpx.post(url, json=CHAT, headers=ADMIN).status_code == 200
    closed = httpx.post(f"{gw.url}/sessions/big/close", json={}, headers=ADMIN).json()
    steps = _steps(session_events, "big")
    assert closed["num_steps"] == 3 == len(steps) == _closed(session_events, "big").num_steps
    assert [s.step_index for s in steps] == [0, 1, 2]
    first, over, last = steps
    assert over.error is not None and over.error.kind == "too_large"
    assert "4096" in over.error.message and "RLLM_MAX_MESSAGE_BYTES" in over.error.message
    assert over.token_status is TokenStatus.MISSING and over.response_token_ids == b""
    assert over.request_json == "null" and over.response_json == "null"
    assert first.token_status is TokenStatus.OK and last.token_status is TokenStatus.OK
    # the next step's delta parent is a step that was published with its tokens
    assert last.parent_step_id in (None, first.step_id)


def test_bad_message_items_are_refused_by_index(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    r = httpx.post(
        f"{gw.url}/sessions/items/v1/chat/completions",
        json={**CHAT, "messages": [1, 2]},
        headers=ADMIN,
    )
    assert r.status_code == 400 and "'messages[0]'" in r.json()["error"]["message"]
    r = httpx.post(
        f"{gw.url}/sessions/items/v1/chat/completions",
        json={**CHAT, "messages": [{"role": "user", "content": "a"}, {"content": "b"}]},
        headers=ADMIN,
    )
    assert r.status_code == 400 and "'messages[1]'" in r.json()["error"]["message"]
    r = httpx.post(
        f"{gw.url}/sessions/items/v1/messages", json={**MSG, "messages": ["x"]}, headers=ADMIN
    )
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert "'messages[0]'" in r.json()["error"]["message"]
    r = httpx.post(
        f"{gw.url}/sessions/items/v1/responses", json={"model": "m", "input": [7]}, headers=ADMIN
    )
    assert r.status_code == 400 and "'input[0]'" in r.json()["error"]["message"]
    assert session_events() == []


def test_body_shorter_than_its_content_length_is_answered_promptly(
    start_gateway: Callable[..., ThreadedServer],
) -> None:
    gw = start_gateway(body_timeout_s=0.5)
    host, port = gw.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        t0 = time.monotonic()
        sock.sendall(
            b"POST /sessions/short/v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
            + f"authorization: Bearer {ADMIN_KEY}\r\n".encode()
            + b"content-type: application/json\r\ncontent-length: 100\r\n\r\n"
            + b'{"model": "m"'
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        elapsed = time.monotonic() - t0
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:200]
    assert elapsed < 3.0, elapsed
    message = json.loads(body)["error"]["message"]
    assert "13 bytes" in message and "100" in message


def test_anthropic_errors_are_anthropic_shaped(
    start_gateway: Callable[..., ThreadedServer],
) -> None:
    gw = start_gateway()
    key = httpx.post(f"{gw.url}/sessions", json={"session_id": "a"}, headers=ADMIN).json()
    r = httpx.post(f"{gw.url}/sessions/a/v1/messages", json=MSG, headers={"x-api-key": "wrong"})
    assert r.status_code == 401
    assert r.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": r.json()["error"]["message"]},
    }
    hdr = {"x-api-key": key["api_key"]}
    r = httpx.post(
        f"{gw.url}/sessions/a/v1/messages", json={**MSG, "model": "error-500"}, headers=hdr
    )
    assert r.status_code == 500
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "api_error"
    assert "fake upstream failure" in r.json()["error"]["message"]
    r = httpx.post(
        f"{gw.url}/sessions/a/v1/messages", json={**MSG, "model": "error-400"}, headers=hdr
    )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    # the OpenAI paths keep the OpenAI shape
    r = httpx.post(
        f"{gw.url}/sessions/a/v1/chat/completions", json=CHAT, headers={"x-api-key": "no"}
    )
    assert r.status_code == 401 and "type" not in r.json() and "message" in r.json()["error"]


def test_dropped_responses_tools_are_recorded_and_logged_once_per_session(
    start_gateway: Callable[..., ThreadedServer],
    caplog: pytest.LogCaptureFixture,
    session_events: Events,
) -> None:
    gw = start_gateway()
    name = f"ns_{uuid.uuid4().hex[:8]}"
    tools = [
        {"type": "web_search"},
        {"type": "namespace", "name": name, "tools": []},
        {"type": "function", "name": "f", "parameters": {"type": "object"}},
    ]
    body = {"model": "m", "input": "hi", "tools": tools}
    with caplog.at_level(logging.WARNING, logger="rllm.gateway"):  # the default log's level
        for sid in ("tools", "tools", "other"):
            r = httpx.post(f"{gw.url}/sessions/{sid}/v1/responses", json=body, headers=ADMIN)
            assert r.status_code == 200, r.text
    noted = [r for r in caplog.records if f"namespace:{name}" in r.getMessage()]
    assert [r.levelname for r in noted] == ["WARNING", "WARNING"]
    notes = [r.getMessage() for r in noted]
    assert len(notes) == 2, notes
    assert "session tools: responses ['tools:namespace:" in notes[0]
    assert "not sent to the chat-completions upstream" in notes[0]
    assert "session other" in notes[1]
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    dropped = [json.loads(s.sampling_params_json)["dropped"] for s in steps]
    assert dropped == [[f"tools:namespace:{name}", "tools:web_search"]] * 3
