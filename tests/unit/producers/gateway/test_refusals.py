"""Pure refusals of the gateway: body reading (depth, stalls), message items, the
Anthropic error shape, and the payload-free step of a call over the event limit."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rllm.producers.gateway.capture import step_event, too_large
from rllm.producers.gateway.errors import GatewayError, anthropic_error
from rllm.producers.gateway.sessions import SessionRegistry
from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.types import Capture
from rllm.producers.gateway.validation import read_json, validate_call
from rllm.schemas.types import ApiKind, StepCaptured, StepError, Task, TokenStatus, Usage


def _reader(settings: GatewaySettings) -> Starlette:
    async def echo(request: Request) -> Response:
        try:
            return JSONResponse({"body": await read_json(request, settings)})
        except GatewayError as exc:
            return JSONResponse({"status": exc.status, "message": exc.message}, exc.status)

    return Starlette(routes=[Route("/", echo, methods=["POST"])])


async def test_deep_json_is_a_400_with_a_reason() -> None:
    app = _reader(GatewaySettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        r = await c.post("/", content=b"[" * 50_000)
        assert r.status_code == 400 and "nested too deeply" in r.json()["message"]
        assert (await c.post("/", content=b"[[1]]")).json() == {"body": [[1]]}


async def test_nan_in_a_request_is_a_400_naming_it() -> None:
    app = _reader(GatewaySettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        r = await c.post("/", content=b'{"temperature": NaN}')
        assert r.status_code == 400
        assert r.json()["message"] == (
            "malformed JSON body: NaN is not a JSON value; send a number or null"
        )
        big = b'{"seed": 123456789012345678901234567890}'
        assert (await c.post("/", content=big)).json() == {
            "body": {"seed": 123456789012345678901234567890}
        }


async def test_a_stalled_body_is_a_408_naming_what_came() -> None:
    settings = GatewaySettings(body_timeout_s=0.2)

    async def stalls() -> Any:
        yield b'{"a":'
        await asyncio.sleep(5)
        yield b"1}"

    app = _reader(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        t0 = asyncio.get_running_loop().time()
        r = await c.post("/", content=stalls(), headers={"content-length": "7"})
        assert asyncio.get_running_loop().time() - t0 < 2.0
    assert r.status_code == 408
    assert "after 5 bytes of the 7" in r.json()["message"]


@pytest.mark.parametrize(
    ("api", "body", "named"),
    [
        (ApiKind.CHAT, {"model": "m", "messages": [1, 2]}, "'messages[0]'"),
        (ApiKind.CHAT, {"model": "m", "messages": [{"role": "user"}, {"x": 1}]}, "'messages[1]'"),
        (ApiKind.ANTHROPIC_MESSAGES, {"model": "m", "messages": ["hi"]}, "'messages[0]'"),
        (ApiKind.RESPONSES, {"model": "m", "input": [{"role": "user"}, 3]}, "'input[1]'"),
    ],
)
def test_message_items_are_checked_by_index(api: ApiKind, body: dict[str, Any], named: str) -> None:
    with pytest.raises(GatewayError) as info:
        validate_call(api, body)
    assert info.value.status == 400 and named in info.value.message


def test_valid_items_and_completion_prompts_pass() -> None:
    validate_call(ApiKind.CHAT, {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    validate_call(ApiKind.COMPLETIONS, {"model": "m", "prompt": [1, 2, 3]})
    validate_call(ApiKind.RESPONSES, {"model": "m", "input": "hi"})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "not_found_error"),
        (408, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (504, "timeout_error"),
    ],
)
def test_anthropic_error_shape(status: int, kind: str) -> None:
    assert anthropic_error(status, "why") == {
        "type": "error",
        "error": {"type": kind, "message": "why"},
    }


def test_too_large_step_keeps_the_facts_and_drops_the_payloads() -> None:
    session = SessionRegistry().open("s", "r", Task(task_id="t"))
    cap = Capture(
        api=ApiKind.CHAT,
        model="m",
        request={"messages": ["x" * 100]},
        started_at=datetime.now(UTC),
        upstream="http://u",
        policy_version=3,
        response={"choices": []},
        prompt_ids=[1, 2],
        response_ids=[3],
        logprobs=[-0.5],
        usage=Usage(prompt_tokens=2, completion_tokens=1),
        error=StepError(kind="upstream_status", message="boom", status_code=500),
        latency_ms=12.0,
    )
    small = too_large(cap, "SessionEvent is 9000 bytes, over the 4096-byte limit")
    event, delta = step_event(session, small, 4, "p")
    session.advance(delta)
    step = event.payload
    assert isinstance(step, StepCaptured)
    assert step.error is not None and step.error.kind == "too_large"
    assert "4096" in step.error.message and "upstream_status 500: boom" in step.error.message
    assert step.error.status_code == 500  # what the agent got from the upstream
    assert step.request_json == "null" and step.response_json == "null"
    assert step.token_status is TokenStatus.MISSING and step.prompt_token_ids == b""
    assert step.step_index == 4 and step.policy_version == 3 and step.latency_ms == 12.0
    assert step.usage.prompt_tokens == 2
    assert session.last_step_id is None and session.num_steps == 1
    answered = too_large(dataclasses.replace(cap, error=None), "over")
    assert answered.error is not None and answered.error.status_code is None
    assert "the call itself failed" not in answered.error.message


@pytest.mark.parametrize(
    ("n", "got"),
    [
        ("4", "'4' (str)"),
        (129, "129 (int)"),
        (0, "0 (int)"),
        (True, "True (bool)"),
        (2.0, "2.0 (float)"),
    ],
)
def test_an_n_whose_choices_would_not_all_be_captured_is_refused(n: Any, got: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": n}
    with pytest.raises(GatewayError) as info:
        validate_call(ApiKind.CHAT, body)
    assert info.value.status == 400
    assert info.value.message.startswith(
        f"'n' must be an integer from 1 to 128 (the gateway captures each choice as its own "
        f"step, at most 128), got {got}"
    )
    for fine in (None, 1, 128):
        validate_call(ApiKind.CHAT, {**body, "n": fine})
