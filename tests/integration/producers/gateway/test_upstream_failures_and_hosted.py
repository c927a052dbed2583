"""Upstream timeouts, unreachable upstreams and streamed errors pass through faithfully and
are recorded as failed steps; hosted passthrough records token status missing."""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest

from rllm.schemas.types import SessionEvent, StepCaptured, TokenStatus
from tests.fakes.upstream import RunningUpstream, ThreadedServer, free_port
from tests.integration.producers.gateway.fixtures import ADMIN_KEY, Events

MSG = [{"role": "user", "content": "x"}]


def _steps(events: list[tuple[str, SessionEvent]]) -> list[StepCaptured]:
    return [e.payload for _, e in events if isinstance(e.payload, StepCaptured)]


def test_timeout_unreachable_and_stream_errors(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(upstream_timeout_s=0.5)
    client = openai.OpenAI(base_url=f"{gw.url}/sessions/f/v1", api_key=ADMIN_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="slow-2", messages=MSG)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    assert info.value.status_code == 504 and "timed out" in str(info.value)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="error-400", messages=MSG, stream=True)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    assert "fake bad request" in str(bad.value)
    dead = start_gateway(upstream_url=f"http://127.0.0.1:{free_port()}")
    client2 = openai.OpenAI(base_url=f"{dead.url}/sessions/g/v1", api_key=ADMIN_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as gone:
        client2.chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    assert gone.value.status_code == 502
    client.close()
    client2.close()
    by_session: dict[str, list[StepCaptured]] = {}
    for key, event in session_events():
        if isinstance(event.payload, StepCaptured):
            by_session.setdefault(key, []).append(event.payload)
    f_steps, g_steps = by_session["f"], by_session["g"]
    assert [(s.error.kind, s.error.status_code) for s in f_steps if s.error] == [
        ("upstream_timeout", 504),
        ("upstream_status", 400),
    ]
    assert [(s.error.kind, s.error.status_code) for s in g_steps if s.error] == [
        ("upstream_unreachable", 502)
    ]
    assert all(s.token_status is TokenStatus.MISSING for s in f_steps + g_steps)


def test_hosted_passthrough_records_missing_tokens(
    start_gateway: Callable[..., ThreadedServer], session_events: Events, upstream: RunningUpstream
) -> None:
    gw = start_gateway(upstream_kind="hosted", upstream_api_key="sk-upstream-secret")
    client = openai.OpenAI(base_url=f"{gw.url}/sessions/h/v1", api_key=ADMIN_KEY)
    reply = client.chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    client.close()
    assert reply.choices[0].message.content
    sent = upstream.state.requests[-1]
    assert "return_token_ids" not in sent and "logprobs" not in sent
    steps = _steps(session_events())
    assert len(steps) == 1 and steps[0].token_status is TokenStatus.MISSING
    assert steps[0].prompt_token_ids == b"" and steps[0].usage.prompt_tokens > 0
    assert "sk-upstream-secret" not in steps[0].request_json + steps[0].upstream
