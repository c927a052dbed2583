"""Secure by default (issue 17, defect 5): session keys are always enforced, made-up
session ids open nothing, session info is shown only to its owner or the admin; the open
behaviour needs ``insecure`` and says so in the log."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
import pytest

from rllm.schemas.types import SessionOpened, StepCaptured
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, Events

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_keys_are_enforced_without_any_setting(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    url = gw.url
    a = httpx.post(f"{url}/sessions", json={"session_id": "a"}, headers=ADMIN).json()
    b = httpx.post(f"{url}/sessions", json={"session_id": "b"}, headers=ADMIN).json()
    call = f"{url}/sessions/a/v1/chat/completions"
    for headers in ({}, _bearer("wrong"), _bearer(b["api_key"]), {"x-api-key": "x"}):
        r = httpx.post(call, json=CHAT, headers=headers)
        assert r.status_code == 401, headers
        assert "wrong key for session 'a'" in r.json()["error"]["message"]
    assert httpx.post(call, json=CHAT, headers=_bearer(a["api_key"])).status_code == 200
    # made-up session ids: 404 with a reason, for no key, a session's key or a wrong one
    for headers in ({}, _bearer(a["api_key"]), _bearer("wrong")):
        r = httpx.post(f"{url}/sessions/made-up/v1/chat/completions", json=CHAT, headers=headers)
        assert r.status_code == 404
        assert "only the admin key opens sessions implicitly" in r.json()["error"]["message"]
    # the plain /v1 route needs a session's key
    r = httpx.post(f"{url}/v1/chat/completions", json=CHAT)
    assert r.status_code == 401 and "no open session has this key" in r.json()["error"]["message"]
    # session info: only with its key or the admin key, never with its key in the answer
    info = f"{url}/sessions/a"
    for headers in ({}, _bearer("wrong"), _bearer(b["api_key"])):
        r = httpx.get(info, headers=headers)
        assert r.status_code == 404 and "or not yours" in r.json()["error"]["message"]
    for headers in (_bearer(a["api_key"]), ADMIN):
        shown = httpx.get(info, headers=headers)
        assert shown.status_code == 200, shown.text
        assert shown.json()["num_steps"] == 1 and shown.json()["api_key"] is None
    # closes: a wrong key or another session's key is 401; the session stays open
    for headers in ({}, _bearer(b["api_key"])):
        assert httpx.post(f"{url}/sessions/a/close", json={}, headers=headers).status_code == 401
    assert httpx.get(f"{url}/health").json()["open_sessions"] == 2
    assert (
        httpx.post(f"{url}/sessions/a/close", json={}, headers=_bearer(a["api_key"])).json()[
            "num_steps"
        ]
        == 1
    )
    # admin endpoints refuse anyone else
    assert httpx.post(f"{url}/admin/pause", json={"paused": True}).status_code == 401
    assert httpx.post(f"{url}/v1/events", json=[]).status_code == 401
    # reads too: a session's key is not the admin key, and compares are constant-time
    for path in ("/admin/pause", "/admin/policy"):
        for headers in ({}, _bearer(a["api_key"]), _bearer("test-admin-keY")):
            r = httpx.get(f"{url}{path}", headers=headers)
            assert r.status_code == 401, (path, headers, r.text)
            assert r.json()["error"]["message"] == "this endpoint needs the gateway's admin key"
        assert httpx.get(f"{url}{path}", headers=ADMIN).status_code == 200
    events = session_events()
    opened = {e.session_id for _, e in events if isinstance(e.payload, SessionOpened)}
    assert opened == {"a", "b"}  # the made-up ids opened nothing
    assert [e.session_id for _, e in events if isinstance(e.payload, StepCaptured)] == ["a"]


def test_insecure_is_the_old_open_behaviour_and_says_so(
    start_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="rllm.gateway"):
        gw = start_gateway(insecure=True)
        r = httpx.post(f"{gw.url}/sessions/anyone/v1/chat/completions", json=CHAT)
    assert r.status_code == 200
    assert any("INSECURE" in rec.getMessage() for rec in caplog.records)
    assert httpx.get(f"{gw.url}/sessions/anyone").json()["num_steps"] == 1
    assert httpx.post(f"{gw.url}/sessions/anyone/close", json={}).status_code == 200
    steps = [e for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert [e.session_id for e in steps] == ["anyone"]
