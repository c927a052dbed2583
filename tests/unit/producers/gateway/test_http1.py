"""The gateway's HTTP/1.1 client for whole answers, against scripted loopback servers: the
ways an answer's end is told (length, chunks, the connection closing), which connections
are kept, a cancelled call closing its connection, broken answers, and uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import uvloop

from rllm.producers.gateway.http1 import Http1Pool
from tests.fakes.loopback import Script, scripted_socket

TIMEOUT = {"pool": 5.0, "connect": 5.0, "read": 5.0}


async def _head(reader: asyncio.StreamReader) -> bytes:
    """One request: its head and body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


@asynccontextmanager
async def _server(serve: Script) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server; ``serve(n, reader, writer)`` serves its ``n``-th connection.
    Yields its URL and the numbers of the connections that were closed by the client."""
    ended: list[int] = []

    async def watched(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve(n, reader, writer)
            if await reader.read() == b"":
                ended.append(n)
        except (asyncio.IncompleteReadError, ConnectionError):
            ended.append(n)

    async with scripted_socket(watched) as url:
        yield f"{url}/v1/x", ended


async def _post(pool: Http1Pool, url: str, body: bytes = b"{}") -> tuple[int, bytes]:
    answer = await pool.post(url, {"content-type": "application/json"}, body, TIMEOUT)
    return answer.status, answer.content


async def test_length_chunks_and_a_closing_connection_each_end_an_answer() -> None:
    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await _head(reader)
        assert request.startswith(b"POST /v1/x HTTP/1.1\r\nhost: 127.0.0.1:")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst")
        await _head(reader)  # the same connection, kept alive
        writer.write(b"HTTP/1.1 201 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"3\r\nsec\r\n")
        await writer.drain()
        writer.write(b"3\r\nond\r\n0\r\n\r\n")
        await _head(reader)
        writer.write(b"HTTP/1.1 202 OK\r\nconnection: close\r\n\r\nthird, to the end")
        await writer.drain()
        writer.close()

    async with _server(serve) as (url, _ended):
        pool = Http1Pool()
        got = [await _post(pool, url) for _ in range(3)]
        await pool.aclose()
    assert got == [(200, b"first"), (201, b"second"), (202, b"third, to the end")]


async def test_a_connection_the_server_will_close_is_not_kept() -> None:
    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\n%d" % n)
        await writer.drain()

    async with _server(serve) as (url, _ended):
        pool = Http1Pool()
        got = [await _post(pool, url) for _ in range(2)]
        await pool.aclose()
    assert got == [(200, b"1"), (200, b"2")]  # a new connection for the second


async def test_an_idle_connection_past_its_keepalive_is_not_reused() -> None:
    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n%d" % n)
            await writer.drain()

    async with _server(serve) as (url, ended):
        pool = Http1Pool(keepalive_s=0.2)
        first = await _post(pool, url)
        again = await _post(pool, url)
        await asyncio.sleep(0.3)
        later = await _post(pool, url)
        await asyncio.sleep(0.05)
        assert ended == [1]  # the stale one was closed by the pool
        await pool.aclose()
    assert [first, again, later] == [(200, b"1"), (200, b"1"), (200, b"2")]


async def test_a_cancelled_call_closes_its_connection() -> None:
    answered = asyncio.Event()

    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        answered.set()  # and never answers: "generating" until the client goes away

    async with _server(serve) as (url, ended):
        pool = Http1Pool()
        call = asyncio.ensure_future(_post(pool, url))
        await answered.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(100):
            if ended:
                break
            await asyncio.sleep(0.01)
        assert ended == [1]
        await pool.aclose()


async def test_broken_answers_are_protocol_errors_and_silence_a_read_timeout() -> None:
    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        if n == 1:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        elif n == 2:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf")
            await writer.drain()
            writer.close()
        else:
            await asyncio.sleep(5)
        await writer.drain()

    async with _server(serve) as (url, _ended):
        pool = Http1Pool()
        with pytest.raises(httpx.RemoteProtocolError, match="invalid HTTP answer"):
            await _post(pool, url)
        with pytest.raises(httpx.RemoteProtocolError, match="without sending complete"):
            await _post(pool, url)
        with pytest.raises(httpx.ReadTimeout):
            await pool.post(url, {}, b"{}", {**TIMEOUT, "read": 0.2})
        await pool.aclose()
        with pytest.raises(httpx.TransportError, match="closed"):
            await _post(pool, url)


def test_it_runs_on_uvloop() -> None:
    """The gateway's loop: its transports are not asyncio's classes."""

    async def serve(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for k in range(3):
            body = await _head(reader)
            assert body.endswith(b'{"k": %d}' % k)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async def main() -> list[tuple[int, bytes]]:
        async with _server(serve) as (url, _ended):
            pool = Http1Pool()
            got = [await _post(pool, url, b'{"k": %d}' % k) for k in range(3)]
            await pool.aclose()
            return got

    assert uvloop.run(main()) == [(200, b"ok")] * 3
