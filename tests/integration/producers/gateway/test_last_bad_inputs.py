"""The gateway's last bad inputs (issue 33, item 3): what it cannot send on is a 400 that
names it and takes no step index, and what it records says what happened."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from rllm.schemas.types import StepCaptured
from tests.fakes.upstream import RunningUpstream, ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, Events

HI = b'{"model":"m","messages":[{"role":"user","content":"hi"}]'


def _steps(session_events: Events, sid: str) -> list[StepCaptured]:
    return [
        e.payload
        for key, e in session_events()
        if key == sid and isinstance(e.payload, StepCaptured)
    ]


def _open_chat(
    start_gateway: Callable[..., ThreadedServer], sid: str
) -> tuple[str, dict[str, str]]:
    """Start a gateway and open session ``sid`` on it: the chat-completions URL, and the
    headers that carry the session's key."""
    url = start_gateway().url
    info = httpx.post(f"{url}/sessions", json={"session_id": sid}, headers=ADMIN).json()
    key = {"authorization": f"Bearer {info['api_key']}", "content-type": "application/json"}
    return f"{url}/v1/chat/completions", key


def test_values_no_upstream_can_read_are_400s_that_take_no_step_index(
    start_gateway: Callable[..., ThreadedServer],
    upstream: RunningUpstream,
    session_events: Events,
) -> None:
    url, hdr = _open_chat(start_gateway, "unsendable")
    before = len(upstream.state.requests)
    assert httpx.post(url, content=HI + b"}", headers=hdr).status_code == 200
    refused = {
        b'{"model":"m","messages":[{"role":"user","content":"a\\ud800"}]}': (
            "malformed JSON body: 'messages[0].content' holds a lone surrogate (\\ud800), "
            "which UTF-8 cannot encode"
        ),
        HI + b',"temperature":1e400}': (
            "malformed JSON body: 'temperature' is 1e400, out of a double's range (it would "
            "read as infinity); send a finite number or null"
        ),
        HI + b',"top_p":-Infinity}': (
            "malformed JSON body: -Infinity is not a JSON value; send a number or null"
        ),
    }
    for body, reason in refused.items():
        r = httpx.post(url, content=body, headers=hdr)
        assert r.status_code == 400, (body, r.status_code, r.text[:300])
        assert r.json()["error"]["message"].startswith(reason), r.json()
    assert httpx.post(url, content=HI + b',"temperature":0.5}', headers=hdr).status_code == 200
    steps = _steps(session_events, "unsendable")
    assert [s.step_index for s in steps] == [0, 1]
    assert len(upstream.state.requests) == before + 2
    assert upstream.state.requests[-1]["temperature"] == 0.5
    assert all("Infinity" not in s.request_json + s.sampling_params_json for s in steps)


def test_an_n_not_every_choice_of_which_is_captured_is_refused_before_the_upstream(
    start_gateway: Callable[..., ThreadedServer],
    upstream: RunningUpstream,
    session_events: Events,
) -> None:
    url, hdr = _open_chat(start_gateway, "many")
    before = len(upstream.state.requests)
    for n, got in ((b'"4"', "'4' (str)"), (b"129", "129 (int)")):
        r = httpx.post(url, content=HI + b',"n":' + n + b"}", headers=hdr)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].startswith(
            f"'n' must be an integer from 1 to 128 (the gateway captures each choice as its "
            f"own step, at most 128), got {got}"
        )
    assert httpx.post(url, content=HI + b"}", headers=hdr).status_code == 200
    assert len(upstream.state.requests) == before + 1
    assert [s.step_index for s in _steps(session_events, "many")] == [0]


def test_a_session_id_its_close_path_would_not_reach_is_refused_at_open(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    reason = "session id 'a/v1/b' cannot be used in the gateway's paths: /sessions/{id}/close"
    r = httpx.post(f"{gw.url}/sessions", json={"session_id": "a/v1/b"}, headers=ADMIN)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(reason)
    r = httpx.post(f"{gw.url}/sessions", json=[{"session_id": "a/v1/b"}], headers=ADMIN)
    assert r.status_code == 200 and r.json()[0]["error"]["code"] == 400
    implicit = f"{gw.url}/sessions/a/v1/b/v1/chat/completions"
    r = httpx.post(implicit, content=HI + b"}", headers=ADMIN)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(reason)
    assert httpx.get(f"{gw.url}/health").json()["open_sessions"] == 0
    assert session_events() == []
