"""The upstream client, through its own connection stack to a loopback server: statuses,
timeouts, bad bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.upstreams import Upstream, UpstreamFailure
from tests.fakes.loopback import LoopbackServer, MockHandler


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Upstream]]:
    """``serve(handler, **settings)``: an upstream in front of ``handler`` on a loopback
    socket (both closed at the end)."""
    made: list[tuple[LoopbackServer, Upstream]] = []

    def start(handler: MockHandler, **overrides: object) -> Upstream:
        server = LoopbackServer(handler)
        settings = GatewaySettings(upstream_url=server.url, **overrides)  # type: ignore[arg-type]  # settings fields of several types
        made.append((server, Upstream(settings)))
        return made[-1][1]

    yield start
    for server, up in made:
        await up.aclose()
        server.stop()


async def test_status_timeout_and_invalid_body_become_failures(
    serve: Callable[..., Upstream],
) -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        if body["model"] == "boom":
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        if body["model"] == "slow":
            raise httpx.ReadTimeout("slow", request=request)
        if body["model"] == "html":
            return httpx.Response(200, text="<html>")
        return httpx.Response(200, json={"ok": True})

    up = serve(handle, upstream_api_key="sk-secret", upstream_timeout_s=0.5)
    assert await up.post_json(
        "/v1/chat/completions",
        {"model": "m"},
        {"anthropic-version": "1", "authorization": "Bearer agent"},
    ) == {"ok": True}
    assert (
        seen[0].headers["authorization"] == "Bearer sk-secret"
    )  # the agent's key is not forwarded
    assert seen[0].headers["anthropic-version"] == "1"
    with pytest.raises(UpstreamFailure) as status:
        await up.post_json("/v1/chat/completions", {"model": "boom"}, {})
    assert status.value.status == 503 and status.value.error.kind == "upstream_status"
    assert b"overloaded" in status.value.body
    with pytest.raises(UpstreamFailure) as slow:
        await up.post_json("/v1/chat/completions", {"model": "slow"}, {})
    assert slow.value.status == 504 and slow.value.error.kind == "upstream_timeout"
    with pytest.raises(UpstreamFailure) as html:
        await up.post_json("/v1/chat/completions", {"model": "html"}, {})
    assert html.value.status == 502 and html.value.error.kind == "invalid_response"
    assert "sk-secret" not in str(slow.value) + str(status.value) + str(html.value)


async def test_a_closed_keepalive_connection_is_retried_once(
    serve: Callable[..., Upstream],
) -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, json={"n": len(calls)})

    up = serve(handle)
    assert await up.post_json("/v1/completions", {"model": "m"}, {}) == {"n": 2}

    def always(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    up2 = serve(always)
    with pytest.raises(UpstreamFailure) as info:
        await up2.post_json("/v1/completions", {"model": "m"}, {})
    assert info.value.status == 502 and info.value.error.kind == "upstream_unreachable"
