"""The gateway's session API as the SDK uses it: open, close, publish events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from rllm.producers.sdk.errors import GatewayRequestError
from rllm.producers.sdk.types import SessionTotals
from rllm.schemas.convert import to_json_dict
from rllm.schemas.types import SessionEvent, SessionStatus, Task
from rllm.tls import shared_tls

__all__ = ["KEEPALIVE_S", "GatewayClient", "GatewayRequestError", "SessionHandle"]

log = logging.getLogger(__name__)

KEEPALIVE_S = 2.0
"""Seconds an idle pooled connection is kept (below the gateway server's 5)."""

MAX_BULK = 1024
"""Most opens or closes in one request (the gateway's limit)."""


class SessionHandle:
    """An open session: its id, base URL and key."""

    def __init__(self, session_id: str, run_id: str, base_url: str, api_key: str) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.base_url = base_url
        self.api_key = api_key


def _code(result: dict[str, Any]) -> int | None:
    error = result.get("error")
    return error.get("code") if isinstance(error, dict) else None


def _checked(what: str, result: dict[str, Any]) -> dict[str, Any]:
    """One item's result of a list request; its ``error`` raises GatewayRequestError."""
    error = result.get("error")
    if error is None:
        return result
    message = error.get("message") if isinstance(error, dict) else error
    raise GatewayRequestError(f"gateway refused {what}: {_code(result)} {message}")


class _Coalesced:
    """Concurrent calls of one kind go to the gateway as one list request.

    The first call is sent as soon as the event loop is free (with every call made in the
    same turn of the loop); calls made while a request is in flight wait and go together in
    the next. So calls one at a time cost nothing extra, and the 32 opens or closes of a
    batch of rollouts cost one or a few requests instead of 32.
    """

    def __init__(
        self, send: Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]
    ) -> None:
        self._send = send
        self._waiting: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def __call__(self, item: dict[str, Any]) -> dict[str, Any]:
        """The gateway's result for ``item`` (its info, or ``{"error": ...}``)."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, fut))
        if self._sending is None:
            self._sending = asyncio.ensure_future(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BULK], self._waiting[MAX_BULK:]
                try:
                    results = await self._send([item for item, _ in batch])
                except BaseException as exc:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)
        finally:
            self._sending = None


class GatewayClient:
    """Async client of ``POST /sessions``, ``/sessions/close`` and ``/v1/events``.

    Args:
        url: the gateway's root URL (``http://127.0.0.1:8400``).
        admin_key: the gateway's admin key; default ``$RLLM_ADMIN_KEY``, else the key
            ``rllm-cli up`` stored in ``$RLLM_HOME/gateway/admin-key``, else none.
    """

    def __init__(
        self, url: str, admin_key: str | None = None, timeout_s: float = 60.0, retries: int = 3
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        from rllm.infra.admin_key import resolve_admin_key

        admin_key = resolve_admin_key(admin_key)
        headers = {"Authorization": f"Bearer {admin_key}"} if admin_key else {}
        # An idle pooled connection is dropped after 2 s, before the gateway's server drops
        # it (uvicorn: 5 s); a request sent on a connection the server is closing fails.
        limits = httpx.Limits(keepalive_expiry=KEEPALIVE_S)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=timeout_s,
            limits=limits,
            verify=shared_tls(),
        )
        self._opens = _Coalesced(self._open_many)
        self._closes = _Coalesced(self._close_many)

    async def _send(
        self, path: str, body: Any, key: str | None, replay_safe: bool
    ) -> tuple[httpx.Response, int]:
        """POST with retries on transport errors: always when the gateway cannot have seen
        the request (no connection), and on a broken connection when ``replay_safe``.
        Returns the (successful) response and the attempt that got it (0 for the first)."""
        headers = {"Authorization": f"Bearer {key}"} if key else None
        for attempt in range(self.retries + 1):
            try:
                resp = await self._http.post(path, json=body, headers=headers)
                break
            except httpx.TransportError as exc:
                unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if attempt == self.retries or not (unsent or replay_safe):
                    raise GatewayRequestError(
                        f"gateway {self.url} unreachable ({type(exc).__name__}, attempt "
                        f"{attempt + 1}): {exc}"
                    ) from exc
                log.warning("POST %s: %s; retrying", path, type(exc).__name__)
                await asyncio.sleep(0.2 * 2**attempt)
        if resp.status_code >= 400:
            raise GatewayRequestError(
                f"gateway refused POST {path}: {resp.status_code} {resp.text[:300]}"
            )
        return resp, attempt

    async def open_session(
        self,
        task: Task,
        *,
        run_id: str,
        session_id: str | None = None,
        rollout_index: int = 0,
        group_size: int = 1,
        agent: str = "",
        model: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SessionHandle:
        """Open a session (publishes SessionOpened)."""
        body: dict[str, Any] = {
            "run_id": run_id,
            "task": task.model_dump(),
            "rollout_index": rollout_index,
            "group_size": group_size,
            "agent": agent,
            "model": model,
            "metadata": metadata or {},
        }
        if session_id:
            body["session_id"] = session_id
        info = _checked("POST /sessions", await self._opens(body))
        return SessionHandle(info["session_id"], run_id, info["base_url"], info["api_key"])

    async def _open_many(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # a retried open whose first attempt landed would open a second session
        results, _ = await self._post_list("/sessions", bodies, replay_safe=False)
        return results

    async def _close_many(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results, attempt = await self._post_list("/sessions/close", bodies)
        if attempt:  # "already closed": an earlier attempt closed it, its answer was lost
            results = [{"num_steps": 0} if _code(r) == 409 else r for r in results]
        return results

    async def _post_list(
        self, path: str, bodies: list[dict[str, Any]], *, replay_safe: bool = True
    ) -> tuple[list[dict[str, Any]], int]:
        resp, attempt = await self._send(path, bodies, None, replay_safe)
        results = resp.json()
        if not isinstance(results, list) or len(results) != len(bodies):
            raise GatewayRequestError(
                f"gateway answered POST {path} with {resp.text[:200]!r}, not one result for "
                f"each of its {len(bodies)} items"
            )
        return results, attempt

    async def close_session(
        self, handle: SessionHandle, status: SessionStatus, **close: Any
    ) -> int:
        """Close a session as ``close_session_totals`` does (``close``: its ``output``,
        ``error`` and ``events``); return only the steps it captured."""
        return (await self.close_session_totals(handle, status, **close)).num_steps

    async def close_session_totals(
        self,
        handle: SessionHandle,
        status: SessionStatus,
        output: Any = None,
        error: str | None = None,
        events: list[SessionEvent] | None = None,
    ) -> SessionTotals:
        """Close a session (publishes ``events``, then SessionClosed); return what the
        gateway counted: its steps and the upstream's token usage summed over them (zeros
        when a retry found it already closed by an attempt whose answer was lost)."""
        body: dict[str, Any] = {"status": status.value, "output": output, "error": error}
        body = json.loads(json.dumps(body, default=str))
        if events:
            body["events"] = [to_json_dict(e) for e in events]
        item = {"session_id": handle.session_id, "api_key": handle.api_key, **body}
        result = _checked("POST /sessions/close", await self._closes(item))
        return SessionTotals(
            num_steps=int(result.get("num_steps", 0)),
            prompt_tokens=int(result.get("prompt_tokens", 0)),
            completion_tokens=int(result.get("completion_tokens", 0)),
        )

    async def publish(self, events: list[SessionEvent], key: str | None = None) -> None:
        """Publish events through ``POST /v1/events``; any refusal raises."""
        await self._send("/v1/events", [to_json_dict(e) for e in events], key, replay_safe=True)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()
