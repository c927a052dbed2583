"""The upstream's default transport (aiohttp) against a scripted loopback HTTP server: the
same request and answer as through httpx's own transport, gzip decoded, a connection closed
before its answer retried once, timeouts and refusals as httpx's errors, streams."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from rllm.producers.gateway import jsonio
from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.streaming import sse_json
from rllm.producers.gateway.upstreams import FORWARD_HEADERS, Upstream, UpstreamFailure
from tests.fakes.loopback import scripted_socket

Seen = dict[str, Any]
"""One request the server read: ``line``, ``headers`` (lower-case names), ``body``."""
Handler = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter, list[Seen]], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> Seen | None:
    head = await reader.readuntil(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")[:-2]
    headers = {k.strip().lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return {"line": line, "headers": headers, "body": body}


def _answer(status: int, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@asynccontextmanager
async def _server(handle: Handler) -> AsyncIterator[tuple[str, list[Seen]]]:
    """A loopback server; ``handle(n, reader, writer, seen)`` serves connection ``n``."""
    seen: list[Seen] = []

    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle(n, reader, writer, seen)

    async with scripted_socket(serve) as url:
        yield url, seen


async def _json_answers(
    n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: list[Seen]
) -> None:
    while True:
        request = await _read_request(reader)
        assert request is not None
        seen.append(request)
        body = json.dumps({"echo": json.loads(request["body"]), "conn": n}).encode()
        writer.write(
            _answer(200, body, "content-type: application/json", "X-Rllm-Policy-Version: 7")
        )
        await writer.drain()


def _upstream(url: str, **kw: Any) -> Upstream:
    settings = GatewaySettings(upstream_url=url, upstream_api_key="sk-up", **kw)
    return Upstream(settings)


async def _plain(
    url: str, path: str, body: Any, incoming: dict[str, str], got: dict[str, str]
) -> Any:
    """What httpx's own client and transport send for the same call, and its answer."""
    auth = {"authorization": "Bearer sk-up", "x-api-key": "sk-up"}
    async with httpx.AsyncClient(base_url=url, headers=auth) as client:
        forwarded = {k: v for k, v in incoming.items() if k in FORWARD_HEADERS}
        headers = {**forwarded, "content-type": "application/json"}
        answer = await client.post(path, content=jsonio.dumps(body), headers=headers)
    got.update(answer.headers)
    return answer.json()


async def test_the_fast_path_sends_and_reads_what_httpx_does() -> None:
    async with _server(_json_answers) as (url, seen):
        body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}
        incoming = {"anthropic-version": "1", "authorization": "Bearer agent", "x-other": "no"}
        fast = _upstream(url + "/prefix")
        assert fast.transport is fast.stack.transport, "the gateway's own stack, no proxy"
        answers, headers = [], []
        for plain in (False, True, False):  # the fast one twice: its connection is reused
            got: dict[str, str] = {}
            path = "/v1/chat/completions"
            answers.append(
                await _plain(url + "/prefix/", path[1:], body, incoming, got)
                if plain
                else await fast.post_json(path, body, incoming, got)
            )
            headers.append(got)
        await fast.aclose()
        with pytest.raises(UpstreamFailure) as closed:  # a closed one opens no connection
            await fast.post_json("/v1/chat/completions", body, incoming)
        assert closed.value.status == 502 and "closed" in closed.value.error.message
        assert len(seen) == 3
    assert answers[0]["echo"] == answers[1]["echo"] == answers[2]["echo"] == body
    assert [a["conn"] for a in answers] == [1, 2, 1]
    assert headers[0]["x-rllm-policy-version"] == headers[1]["x-rllm-policy-version"] == "7"
    assert headers[0]["content-type"] == "application/json"
    lines = [s["line"] for s in seen]
    assert lines == ["POST /prefix/v1/chat/completions HTTP/1.1"] * 3
    assert seen[0]["body"] == seen[1]["body"]  # the same bytes either way
    for request in seen:
        assert request["headers"]["authorization"] == "Bearer sk-up"  # never the agent's
        assert request["headers"]["x-api-key"] == "sk-up"
        assert request["headers"]["anthropic-version"] == "1"
        assert "x-other" not in request["headers"]
        assert request["headers"]["content-type"] == "application/json"


async def test_a_gzip_answer_is_decoded() -> None:
    async def handle(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})
        zipped = gzip.compress(b'{"ok": true}')
        writer.write(_answer(200, zipped, "content-encoding: gzip"))
        await writer.drain()

    async with _server(handle) as (url, _seen):
        up = _upstream(url)
        assert await up.post_json("/v1/completions", {"model": "m"}, {}) == {"ok": True}
        await up.aclose()


async def test_a_connection_closed_before_its_answer_is_retried_once() -> None:
    async def first_closes(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})
        if n > 1:
            writer.write(_answer(200, b'{"n": %d}' % n))
            await writer.drain()

    async with _server(first_closes) as (url, seen):
        up = _upstream(url)
        assert await up.post_json("/v1/completions", {"model": "m"}, {}) == {"n": 2}
        assert len(seen) == 2
        await up.aclose()

    async def always_closes(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})

    async with _server(always_closes) as (url, seen):
        up = _upstream(url)
        with pytest.raises(UpstreamFailure) as info:
            await up.post_json("/v1/completions", {"model": "m"}, {})
        assert info.value.status == 502 and info.value.error.kind == "upstream_unreachable"
        assert "RemoteProtocolError" in info.value.error.message
        assert len(seen) == 2  # tried twice, not more
        await up.aclose()


async def test_timeouts_refusals_and_statuses_are_failures() -> None:
    async def silent(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})
        await asyncio.sleep(5)

    async with _server(silent) as (url, _seen):
        up = _upstream(url, upstream_timeout_s=0.2)
        with pytest.raises(UpstreamFailure) as slow:
            await up.post_json("/v1/completions", {"model": "m"}, {})
        assert slow.value.status == 504 and slow.value.error.kind == "upstream_timeout"
        assert "ReadTimeout" in slow.value.error.message
        await up.aclose()

    async def refuses(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})
        writer.write(_answer(503, b'{"error": {"message": "overloaded"}}'))
        await writer.drain()

    async with _server(refuses) as (url, _seen):
        up = _upstream(url)
        with pytest.raises(UpstreamFailure) as status:
            await up.post_json("/v1/completions", {"model": "m"}, {})
        assert status.value.status == 503 and status.value.error.kind == "upstream_status"
        assert status.value.body == b'{"error": {"message": "overloaded"}}'
        assert "overloaded" in status.value.error.message
        await up.aclose()
    up = _upstream(url)  # the server is gone: nothing listens there now
    with pytest.raises(UpstreamFailure) as gone:
        await up.post_json("/v1/completions", {"model": "m"}, {})
    assert gone.value.status == 502 and gone.value.error.kind == "upstream_unreachable"
    assert "ConnectError" in gone.value.error.message
    await up.aclose()


async def test_streams_go_through_the_httpx_transport() -> None:
    async def stream(n: int, reader: Any, writer: Any, seen: list[Seen]) -> None:
        seen.append(await _read_request(reader) or {})
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(b"transfer-encoding: chunked\r\n\r\n")
        for k in range(3):
            data = b'data: {"k": %d}\n\n' % k
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        if n == 1:  # the first stream ends; the second breaks after its chunks
            writer.write(b"d\r\ndata: [DONE]\n\r\n0\r\n\r\n")
            await writer.drain()

    async with _server(stream) as (url, _seen):
        up = _upstream(url)
        resp = await up.open_stream("/v1/chat/completions", {"model": "m"}, {})
        assert [c async for c in sse_json(resp)] == [{"k": 0}, {"k": 1}, {"k": 2}]
        await resp.aclose()
        broken = await up.open_stream("/v1/chat/completions", {"model": "m"}, {})
        got = []
        with pytest.raises(httpx.RemoteProtocolError):
            async for chunk in sse_json(broken):
                got.append(chunk)
        assert got == [{"k": 0}, {"k": 1}, {"k": 2}]
        await broken.aclose()
        await up.aclose()
