"""The gateway's HTTP/1.1 client for whole answers: an asyncio protocol per connection,
httptools' C parser, a pool of keep-alive connections, one socket write per request.

aiohttp's client (the streams' transport) spends ~0.5 ms of CPU a call here, most of it in
request and response objects, timers and a separate task that writes the body; this one
spends ~0.1 ms. Its errors are httpx's (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``RemoteProtocolError``), as every transport of ``Upstream`` raises.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import NamedTuple, cast
from urllib.parse import urlsplit

import httptools
import httpx

__all__ = ["KEEPALIVE_S", "NO_RESPONSE", "Answer", "Http1Pool"]

KEEPALIVE_S = 4.0
"""How long the upstream pools keep an idle connection: under uvicorn's 5 s, so the server
is not the one to close it under a new request."""

NO_RESPONSE = "Server disconnected without sending a response."
"""httpcore's words for a connection closed before any answer (``Upstream._retrying``
retries those once: nothing reached the model)."""

_BROKEN = "peer closed connection without sending complete message body"


class Answer(NamedTuple):
    """A whole upstream answer."""

    status: int
    headers: Mapping[str, str]
    """By lower-case name."""
    content: bytes
    """The body as sent (``Http1Pool`` leaves a ``Content-Encoding`` to its caller)."""


class _Target(NamedTuple):
    """Where a URL's requests go, and the start of their head."""

    key: tuple[str, str, int]
    """(scheme, host, port): the connections that can serve it."""
    head: bytes
    """The request line and Host header."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.last_read = 0.0
        self._waiter: asyncio.Future[Answer] | None = None
        self._reset()

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._status = 0
        self._got_bytes = False
        self._head_done = False
        self._keep_alive = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.last_read = self.loop.time()
        self._got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        chunked = "chunked" in self._headers.get("transfer-encoding", "")
        if self._head_done and "content-length" not in self._headers and not chunked:
            self.on_message_complete()  # a body that ends with its connection
            return
        message = _BROKEN if self._got_bytes else NO_RESPONSE
        self._fail(httpx.RemoteProtocolError(f"{message} ({exc})" if exc else message))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()
        self._head_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim answer: the real one follows
            self._reset()
            return
        waiter = self._waiter
        self._keep_alive = self.parser.should_keep_alive() and not self.closed
        if waiter is not None and not waiter.done():
            waiter.set_result(Answer(self._status, self._headers, b"".join(self._body)))

    # the pool's side
    def send(self, data: bytes) -> asyncio.Future[Answer]:
        """Write a request; the future holds its answer."""
        assert self.transport is not None
        self._reset()
        self._waiter = waiter = self.loop.create_future()
        self.last_read = self.loop.time()
        self.transport.write(data)
        return waiter

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def timed_out(self) -> None:
        self._fail(httpx.ReadTimeout("read timed out"))
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to the upstreams, by scheme, host and port.

    Args:
        max_connections: connections open at once (further requests wait for one).
        keepalive_s: how long an idle connection is kept (``KEEPALIVE_S``).
    """

    def __init__(self, max_connections: int = 1000, keepalive_s: float = KEEPALIVE_S) -> None:
        self._keepalive_s = keepalive_s
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        self._tls: ssl.SSLContext | None = None
        self._closed = False

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            parts = urlsplit(url)
            scheme, host = parts.scheme, parts.hostname or ""
            if scheme not in ("http", "https") or not host:
                raise httpx.UnsupportedProtocol(f"cannot POST to {url!r}: not an http(s) URL")
            default = 443 if scheme == "https" else 80
            port = parts.port or default
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            authority = host if port == default else f"{host}:{port}"
            if ":" in host:  # an IPv6 literal
                authority = f"[{host}]" if port == default else f"[{host}]:{port}"
            head = f"POST {path} HTTP/1.1\r\nhost: {authority}\r\n".encode("latin-1")
            target = self._targets[url] = _Target((scheme, host, port), head)
        return target

    async def post(
        self,
        url: str,
        headers: Mapping[str, str],
        content: bytes,
        timeout: Mapping[str, float | None],
    ) -> Answer:
        """POST ``content`` and read the whole answer.

        Raises:
            httpx.HTTPError: ``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``,
                ``RemoteProtocolError`` (no answer, a broken one, or a closed pool).
        """
        if self._closed:
            raise httpx.TransportError("the upstream pool is closed")
        target = self._target(url)
        lines = [target.head]
        for name, value in headers.items():
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines.append(b"content-length: %d\r\n\r\n" % len(content))
        lines.append(content)
        await self._take_slot(timeout)
        try:
            conn = await self._connection(target.key, timeout)
            try:
                answer = await self._exchange(conn, b"".join(lines), timeout.get("read"))
            except BaseException:
                conn.close()  # a cancelled call closes it, so the model server stops
                raise
            if conn.reusable and not self._closed:
                conn.idle_since = conn.loop.time()
                self._idle.setdefault(target.key, []).append(conn)
            else:
                conn.close()
            return answer
        finally:
            self._slots.release()

    async def _take_slot(self, timeout: Mapping[str, float | None]) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # returns at once
            return
        try:
            async with asyncio.timeout(timeout.get("pool")):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout("no upstream connection came free in time") from exc

    async def _connection(
        self, key: tuple[str, str, int], timeout: Mapping[str, float | None]
    ) -> _Connection:
        """The most recently used live idle connection to ``key``, else a new one."""
        loop = asyncio.get_running_loop()
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed and loop.time() - conn.idle_since < self._keepalive_s:
                return conn
            conn.close()
        scheme, host, port = key
        tls = None
        if scheme == "https":
            tls = self._tls = self._tls or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout.get("connect")):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop), host, port, ssl=tls
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        return conn

    async def _exchange(self, conn: _Connection, request: bytes, read_s: float | None) -> Answer:
        """Send ``request`` and wait for its answer, at most ``read_s`` between reads."""
        waiter = conn.send(request)
        if read_s is None:
            return await waiter
        loop = conn.loop

        def watch() -> None:
            if waiter.done():
                return
            quiet = loop.time() - conn.last_read
            if quiet >= read_s:
                conn.timed_out()
            else:
                timer[0] = loop.call_later(read_s - quiet, watch)

        timer = [loop.call_later(read_s, watch)]
        try:
            return await waiter
        finally:
            timer[0].cancel()

    async def aclose(self) -> None:
        """Close every connection; later requests fail."""
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        await asyncio.sleep(0)  # the closed connections' sockets close on the next turn
