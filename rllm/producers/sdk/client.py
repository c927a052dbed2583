"""The gateway's session API as the SDK uses it: open, close, publish events."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx

from rllm.errors import RllmError
from rllm.schemas.convert import to_json_dict
from rllm.schemas.types import SessionEvent, SessionStatus, Task
from rllm.tls import shared_tls

__all__ = ["KEEPALIVE_S", "GatewayClient", "GatewayRequestError", "SessionHandle"]

log = logging.getLogger(__name__)

KEEPALIVE_S = 2.0
"""Seconds an idle pooled connection is kept (below the gateway server's 5)."""


class GatewayRequestError(RllmError, ConnectionError):
    """The gateway refused or could not be reached."""


class SessionHandle:
    """An open session: its id, base URL and key."""

    def __init__(self, session_id: str, run_id: str, base_url: str, api_key: str) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.base_url = base_url
        self.api_key = api_key


class GatewayClient:
    """Async client of ``POST /sessions``, ``/sessions/{id}/close`` and ``/v1/events``.

    Args:
        url: the gateway's root URL (``http://127.0.0.1:8400``).
        admin_key: the gateway's admin key, when it has one.
    """

    def __init__(
        self, url: str, admin_key: str | None = None, timeout_s: float = 60.0, retries: int = 3
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
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

    async def _post(
        self, path: str, body: Any, key: str | None = None, *, replay_safe: bool = True
    ) -> dict[str, Any]:
        """POST with retries on transport errors: always when the gateway cannot have seen
        the request (no connection), and on a broken connection when ``replay_safe``."""
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
            if attempt and resp.status_code == 409 and path.endswith("/close"):
                return {}  # an earlier attempt closed it; its answer was lost
            raise GatewayRequestError(
                f"gateway refused POST {path}: {resp.status_code} {resp.text[:300]}"
            )
        result: dict[str, Any] = resp.json()
        return result

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
        # a retried open whose first attempt landed would open a second session
        info = await self._post("/sessions", body, replay_safe=False)
        return SessionHandle(info["session_id"], run_id, info["base_url"], info["api_key"])

    async def close_session(
        self,
        handle: SessionHandle,
        status: SessionStatus,
        output: Any = None,
        error: str | None = None,
        events: list[SessionEvent] | None = None,
    ) -> int:
        """Close a session (publishes ``events``, then SessionClosed); return the steps it
        captured (0 when a retry found it already closed by an attempt whose answer was
        lost)."""
        from urllib.parse import quote

        path = f"/sessions/{quote(handle.session_id, safe='/:')}/close"
        body: dict[str, Any] = {"status": status.value, "output": output, "error": error}
        body = json.loads(json.dumps(body, default=str))
        if events:
            body["events"] = [to_json_dict(e) for e in events]
        info = await self._post(path, body, handle.api_key)
        return int(info.get("num_steps", 0))

    async def publish(self, events: list[SessionEvent], key: str | None = None) -> None:
        """Publish events through ``POST /v1/events``; any refusal raises."""
        await self._post("/v1/events", [to_json_dict(e) for e in events], key)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()
