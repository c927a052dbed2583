"""An ``httpx.MockTransport``-style handler served on a real loopback socket, so the
gateway's own upstream stack (its keep-alive pool, its aiohttp transport) carries the
test's requests as it carries production's.

The handler gets each request as an ``httpx.Request`` and returns an ``httpx.Response``
(or a coroutine of one). An ``httpx.TimeoutException`` it raises leaves the request
unanswered (the client's read timeout ends it); any other ``httpx.TransportError``
closes the connection without an answer (a refused or dropped connection).

``scripted_socket`` is the raw counterpart, for tests of the stack itself: a script reads
and writes the bytes of each connection, in the test's own event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx

__all__ = ["LoopbackServer", "MockHandler", "Script", "scripted_socket"]

MockHandler = Callable[[httpx.Request], "httpx.Response | Awaitable[httpx.Response]"]
Script = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""Serves one raw connection: ``script(n, reader, writer)`` for the server's ``n``-th."""


async def _read(reader: asyncio.StreamReader, base: str) -> httpx.Request:
    head = await reader.readuntil(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")[:-2]
    method, target, _ = line.split(" ", 2)
    headers = [tuple(f.split(":", 1)) for f in fields]
    pairs = [(k.strip(), v.strip()) for k, v in headers]
    length = int(dict((k.lower(), v) for k, v in pairs).get("content-length", "0"))
    body = await reader.readexactly(length)
    return httpx.Request(method, base + target, headers=pairs, content=body)


async def _written(response: httpx.Response) -> bytes:
    body = await response.aread()
    skip = {"content-length", "transfer-encoding", "connection"}
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase or 'X'}"]
    lines += [f"{k}: {v}" for k, v in response.headers.multi_items() if k.lower() not in skip]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class LoopbackServer:
    """``handler`` served on 127.0.0.1 in a daemon thread's event loop; ``url`` is its base
    URL, ``stop()`` ends it.

    Args:
        handler: answers each request, as an ``httpx.MockTransport``'s does.
    """

    def __init__(self, handler: MockHandler) -> None:
        self._handler = handler
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(started,), daemon=True, name="loopback-upstream"
        )
        self._thread.start()
        if not started.wait(30) or self._server is None:
            raise RuntimeError("the loopback upstream did not start")
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        started.set()
        try:
            self._loop.run_forever()
            self._server.close()
            self._loop.run_until_complete(self._server.wait_closed())
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        finally:
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read(reader, self.url)
                try:
                    answer = self._handler(request)
                    response = await answer if inspect.isawaitable(answer) else answer
                except httpx.TimeoutException:
                    await reader.read()  # unanswered until the client gives up
                    return
                except httpx.TransportError:
                    return  # closed without an answer
                writer.write(await _written(response))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        """Close the server and end its thread."""

        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@asynccontextmanager
async def scripted_socket(script: Script) -> AsyncIterator[str]:
    """A raw loopback server in the running loop; yields its base URL.

    Each connection is served by ``script`` and closed after it; a connection the client
    reset or closed under a read ends quietly.
    """
    count = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        count += 1
        try:
            await script(count, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
