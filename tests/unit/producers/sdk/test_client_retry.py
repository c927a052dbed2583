"""The SDK's gateway client on a broken connection: a server that drops the connection
without answering (as a server closing an idle keep-alive connection does)."""

from __future__ import annotations

import asyncio
import json

import pytest

from rllm.producers.sdk.client import GatewayClient, GatewayRequestError, SessionHandle
from rllm.schemas.types import SessionStatus, Task


class FlakyServer:
    """Drops the first ``drops`` connections after reading the request, then answers each
    request with ``status`` and ``body``; counts the requests it read."""

    def __init__(self, drops: int, status: int = 200, body: object | None = None) -> None:
        self.drops, self.status, self.body = drops, status, body or {}
        self.requests: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        self.requests.append(head.split(b" ")[1].decode())
        if len(self.requests) <= self.drops:
            writer.close()
            return
        payload = json.dumps(self.body).encode()
        writer.write(
            f"HTTP/1.1 {self.status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
        writer.close()


async def _serve(server: FlakyServer) -> tuple[asyncio.Server, str]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    return srv, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("drops", [1, 0])
async def test_a_closed_session_counts_as_closed_only_when_the_close_was_retried(
    drops: int,
) -> None:
    closed = {"error": {"code": 409, "message": "session 's' is closed"}}
    flaky = FlakyServer(drops=drops, body=[closed])
    srv, url = await _serve(flaky)
    client = GatewayClient(url)
    try:
        close = client.close_session(SessionHandle("s", "run", url, "k"), SessionStatus.OK)
        if drops:  # the first attempt closed it, and its answer was lost
            assert await close == 0
        else:
            with pytest.raises(GatewayRequestError, match="409 session 's' is closed"):
                await close
    finally:
        await client.aclose()
        srv.close()
    assert flaky.requests == ["/sessions/close"] * (drops + 1)


async def test_publish_is_retried_until_answered() -> None:
    flaky = FlakyServer(drops=2, body={"accepted": 0})
    srv, url = await _serve(flaky)
    client = GatewayClient(url)
    try:
        await client.publish([])
    finally:
        await client.aclose()
        srv.close()
    assert flaky.requests == ["/v1/events"] * 3


async def test_open_is_not_replayed_on_a_broken_connection() -> None:
    flaky = FlakyServer(drops=1, body=[{"session_id": "s", "base_url": "u", "api_key": "k"}])
    srv, url = await _serve(flaky)
    client = GatewayClient(url)
    try:
        with pytest.raises(GatewayRequestError, match="attempt 1"):
            await client.open_session(Task(task_id="t"), run_id="run")
    finally:
        await client.aclose()
        srv.close()
    assert flaky.requests == ["/sessions"]


async def test_gives_up_after_the_retries_naming_the_gateway() -> None:
    flaky = FlakyServer(drops=10)
    srv, url = await _serve(flaky)
    client = GatewayClient(url, retries=2)
    try:
        with pytest.raises(GatewayRequestError, match=f"gateway {url} unreachable.*attempt 3"):
            await client.publish([])
    finally:
        await client.aclose()
        srv.close()
    assert len(flaky.requests) == 3
