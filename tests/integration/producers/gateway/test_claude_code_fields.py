"""What Claude Code sends that a chat-completions upstream has no place for (issue 16 item
3): ``thinking``, ``context_management``, ``output_config``, ``metadata`` and ``?beta=true``
are recorded in the step and logged once per session, and its ``max_tokens: 32000`` is cut
to what the upstream's context leaves instead of being refused."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from rllm.schemas.types import StepCaptured
from tests.fakes.upstream import (
    FakeUpstream,
    RunningUpstream,
    ThreadedServer,
    chat_prompt_text,
    start_fake_upstream,
    tokenize,
)
from tests.integration.producers.gateway.fixtures import ADMIN, Events

CONTEXT = 512

CLAUDE_CODE = {
    "model": "m",
    "max_tokens": 32000,
    "system": [{"type": "text", "text": "You are Claude Code."}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "write hello.txt"}]}],
    "tools": [{"name": "Write", "description": "write", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 31999},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
    "metadata": {"user_id": "user_abc"},
}
DROPPED = ["context_management", "metadata", "output_config", "thinking", "?beta=true"]


@pytest.fixture
def small() -> Iterator[RunningUpstream]:
    """A fake upstream with a small context that refuses what does not fit, as vLLM does."""
    server = start_fake_upstream(state=FakeUpstream(max_model_len=CONTEXT))
    yield server
    server.stop()


def _steps(session_events: Events) -> list[StepCaptured]:
    return [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]


def _prompt_tokens(sent: dict[str, Any]) -> int:
    return len(tokenize(chat_prompt_text(sent["messages"])))


def test_claude_codes_fields_are_recorded_and_its_max_tokens_fits_the_context(
    start_gateway: Callable[..., ThreadedServer],
    small: RunningUpstream,
    session_events: Events,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gw = start_gateway(upstream_url=small.url)
    url = f"{gw.url}/sessions/cc/v1/messages?beta=true"
    with caplog.at_level(logging.INFO, logger="rllm.gateway"):
        whole = httpx.post(url, json=CLAUDE_CODE, headers=ADMIN)
        streamed = httpx.post(url, json={**CLAUDE_CODE, "stream": True}, headers=ADMIN)
        fits = httpx.post(url, json={**CLAUDE_CODE, "max_tokens": 8}, headers=ADMIN)
    assert whole.status_code == 200, whole.text
    assert whole.json()["content"][0]["type"] == "tool_use"
    assert streamed.status_code == 200 and "message_stop" in streamed.text
    assert fits.status_code == 200, fits.text

    sent = small.state.requests
    assert len(sent) == 3
    room = CONTEXT - _prompt_tokens(sent[0])
    assert [r["max_tokens"] for r in sent] == [room, room, 8]
    assert not {"thinking", "context_management", "output_config", "metadata"} & set(sent[0])
    assert sent[0]["tool_choice"] == "auto"
    # asked twice: the third call's 8 tokens cannot reach the end of the context
    assert small.state.tokenized == 2

    steps = _steps(session_events)
    assert len(steps) == 3 and all(s.error is None for s in steps)
    params = [json.loads(s.sampling_params_json) for s in steps]
    assert [p["dropped"] for p in params] == [DROPPED] * 3
    clamp = {"from": 32000, "to": room, "max_model_len": CONTEXT, "prompt_tokens": CONTEXT - room}
    assert [p.get("max_tokens_clamped") for p in params] == [clamp, clamp, None]
    assert [p["max_tokens"] for p in params] == [room, room, 8]
    noted = [r for r in caplog.records if "not sent to the" in r.getMessage()]
    assert [r.levelname for r in noted] == ["WARNING"], "once per session, in the default log"
    notes = [r.getMessage() for r in noted]
    assert "session cc" in notes[0] and "'thinking'" in notes[0] and "'?beta=true'" in notes[0]


def test_a_query_that_may_hold_a_secret_is_recorded_without_its_value(
    start_gateway: Callable[..., ThreadedServer], small: RunningUpstream, session_events: Events
) -> None:
    gw = start_gateway(upstream_url=small.url)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    r = httpx.post(
        f"{gw.url}/sessions/q/v1/chat/completions?api-key=s3cret&beta=true",
        json=body,
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    (step,) = _steps(session_events)
    assert json.loads(step.sampling_params_json)["dropped"] == ["?api-key=***&beta=true"]
    assert "s3cret" not in step.sampling_params_json
    assert small.state.tokenized == 0, "4 tokens cannot reach the end of a 512-token context"


def test_an_sglang_upstream_fits_max_tokens_to_the_prompt_it_tokenized(
    start_sglang_gateway: Callable[..., ThreadedServer],
    small: RunningUpstream,
    session_events: Events,
) -> None:
    gw = start_sglang_gateway(upstream_url=small.url)
    body = {"model": "m", "messages": [{"role": "user", "content": "hello world"}]}
    r = httpx.post(
        f"{gw.url}/sessions/sg/v1/chat/completions",
        json={**body, "max_tokens": 100_000},
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    sent = small.state.requests[-1]
    assert sent["input_ids"] == [2, 4, 7, 8, 3, 2, 5]
    assert sent["sampling_params"]["max_new_tokens"] == CONTEXT - 7
    assert small.state.tokenized == 0, "the gateway knew the prompt's length"
    (step,) = _steps(session_events)
    assert json.loads(step.sampling_params_json)["max_tokens_clamped"] == {
        "from": 100_000,
        "to": CONTEXT - 7,
        "max_model_len": CONTEXT,
        "prompt_tokens": 7,
    }
