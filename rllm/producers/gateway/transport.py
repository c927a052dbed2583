"""The gateway's default transport to its upstream for streams and other requests:
aiohttp's connection pool and C HTTP parser, as an ``httpx`` transport (whole answers go
through ``http1.Http1Pool``, which is cheaper still).

httpx's own pool (httpcore 1.0) scans every pooled connection twice a request, and probes
each idle one's socket, in Python: measured here, 1.1-1.6 ms of CPU a request against
aiohttp's 0.3 ms, growing with the pool, so a gateway that fell behind made more connections
and fell further behind. aiohttp's errors are raised as httpx's (``ConnectError``,
``ReadTimeout``, ``RemoteProtocolError``, ...), so callers see the same exceptions either
way. ``UpstreamStack`` holds the two, for production and tests alike (tests serve their
fake upstreams on loopback sockets; nothing replaces the stack).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp
import httpx
from yarl import URL

from rllm.producers.gateway.http1 import KEEPALIVE_S, NO_RESPONSE, Http1Pool

__all__ = ["AiohttpTransport", "UpstreamStack"]


@contextmanager
def _httpx_errors(request: httpx.Request | None, answered: bool) -> Iterator[None]:
    """Raise aiohttp's errors as the httpx error they stand for (``answered``: the response
    had begun, so a closed connection broke its body)."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
    except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except aiohttp.ServerDisconnectedError as exc:
        message = (
            "peer closed connection without sending complete message body"
            if answered
            else NO_RESPONSE
        )
        raise httpx.RemoteProtocolError(message, request=request) from exc
    except (aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request) from exc
    except aiohttp.ClientOSError as exc:
        if answered:
            raise httpx.ReadError(str(exc), request=request) from exc
        # a pooled connection the server had closed: the request did not get through
        raise httpx.RemoteProtocolError(f"{NO_RESPONSE} ({exc})", request=request) from exc
    except aiohttp.ClientError as exc:
        raise httpx.TransportError(str(exc), request=request) from exc


class _Body(httpx.AsyncByteStream):
    """An aiohttp response's body as httpx reads it."""

    def __init__(self, resp: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._resp = resp
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self._request, answered=True):
            async for chunk in self._resp.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        # a body read to its end gives the connection back to the pool; one left
        # mid-way (a client that went away) closes it, so the upstream stops generating
        if self._resp.content.at_eof():
            self._resp.release()
        else:
            self._resp.close()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport on an aiohttp ``ClientSession`` (made on the first request,
    in the running loop).

    Args:
        max_connections: connections open at once (further requests wait for one).
        keepalive_s: how long an idle connection is kept (``KEEPALIVE_S``).
    """

    def __init__(self, max_connections: int = 1000, keepalive_s: float = KEEPALIVE_S) -> None:
        self._limit = max_connections
        self._keepalive_s = keepalive_s
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._timeouts: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on the first request (never again once closed: a request
        after ``aclose`` would open connections nothing closes)."""
        if self._closed:
            raise httpx.TransportError("the upstream transport is closed")
        connector = aiohttp.TCPConnector(
            limit=self._limit, limit_per_host=0, keepalive_timeout=self._keepalive_s
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
            auto_decompress=False,  # httpx decodes by Content-Encoding
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
            timeout=aiohttp.ClientTimeout(total=None),
            max_line_size=65536,
            max_field_size=65536,
        )
        return self._session

    def _limits(self, timeout: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
        """aiohttp's timeouts for httpx's (``connect`` counts the wait for a pooled
        connection too; ``read`` is between two reads)."""
        key = (timeout.get("pool"), timeout.get("connect"), timeout.get("read"))
        limits = self._timeouts.get(key)
        if limits is None:
            limits = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=_sum(key[0], key[1]), sock_connect=key[1], sock_read=key[2]
            )
        return limits

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        timeout: dict[str, Any] = request.extensions.get("timeout") or {}
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        body = await request.aread()
        with _httpx_errors(request, answered=False):
            resp = await session.request(
                request.method,
                URL(str(request.url), encoded=True),
                headers=headers,
                data=body or None,
                timeout=self._limits(timeout),
                allow_redirects=False,
            )
        return httpx.Response(
            resp.status,
            headers=list(resp.raw_headers),
            stream=_Body(resp, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (resp.reason or "").encode()},
        )

    async def aclose(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None
            await asyncio.sleep(0)  # the closed connections' sockets close on the next turn


class UpstreamStack:
    """The connections to one upstream: whole answers through ``Http1Pool``, streams and
    other requests through ``AiohttpTransport`` (the ``httpx`` client's transport).

    Args:
        max_connections: connections each opens at once.
    """

    def __init__(self, max_connections: int = 1000) -> None:
        self.pool = Http1Pool(max_connections)
        self.transport = AiohttpTransport(max_connections)

    async def aclose(self) -> None:
        """Close both pools (a request after this opens no connection)."""
        await self.pool.aclose()
        await self.transport.aclose()


def _sum(*parts: float | None) -> float | None:
    """The sum of the timeouts that are set (None when none is)."""
    given = [p for p in parts if p is not None]
    return sum(given) if given else None
