"""The session routes: ``POST /sessions`` (open one or many), ``POST /sessions/close``
(close many), and what ``POST /sessions/{id}/close`` and implicit opens share."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rllm.errors import RllmError
from rllm.producers.gateway.admin import guarded, is_admin, may_use, require_admin, state_of
from rllm.producers.gateway.errors import GatewayError
from rllm.producers.gateway.ingest import validate_events
from rllm.producers.gateway.routing import request_key, unaddressable
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.validation import read_json
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionOpened, SessionStatus, Task

__all__ = [
    "MAX_BULK",
    "close_one",
    "close_sessions",
    "open_implicit",
    "open_sessions",
    "session_info",
]


def session_info(st: GatewayState, request: Request, session: Session) -> dict[str, Any]:
    base = (st.settings.public_url or str(request.base_url)).rstrip("/")
    st.settle()  # its steps counted
    return {
        "session_id": session.session_id,
        "run_id": session.run_id,
        "base_url": f"{base}/sessions/{quote(session.session_id, safe='/:')}/v1",
        "api_key": session.key,
        "num_steps": session.num_steps,
    }


MAX_BULK = 1024
"""Most sessions one bulk ``POST /sessions`` or ``POST /sessions/close`` may name."""


@guarded
async def open_sessions(request: Request) -> Response:
    """One session (an object; 201 with its info) or many (a list; 200 with one result per
    item, in order: its info, or ``{"error": {"code", "message"}}`` for an item refused)."""
    st = state_of(request)
    require_admin(st, request)
    body = await read_json(request, st.settings)
    if isinstance(body, list):
        infos = await _bulk(
            body,
            "POST /sessions",
            lambda item: _open_one(st, request, item, "an item of POST /sessions"),
        )
        return JSONResponse(infos)
    info = await _open_one(st, request, body, "POST /sessions (one session, or a list)")
    return JSONResponse(info, status_code=201)


async def _open_one(st: GatewayState, request: Request, body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise GatewayError(400, f"{what} must be a JSON object, got {body!r:.80}")
    sid = str(body.get("session_id") or uuid.uuid4().hex)
    _check_id(sid)
    if st.sessions.get(sid) is not None:
        raise GatewayError(409, f"session {sid!r} is already open")
    try:
        task_data = body.get("task") or {"task_id": str(body.get("task_id", sid))}
        task = Task.model_validate(
            {**task_data, "metadata_json": json.dumps(task_data.get("metadata", {}))}
            if "metadata" in task_data
            else task_data
        )
        opened = SessionOpened(
            task=task,
            rollout_index=int(body.get("rollout_index", 0)),
            group_size=int(body.get("group_size", 1)),
            trajectory_name=str(body.get("trajectory_name", "default")),
            agent=str(body.get("agent", "")),
            policy_version=st.policy_version,
            model=body.get("model"),
            metadata_json=json.dumps(body.get("metadata", {})),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise GatewayError(400, f"invalid session: {exc}") from exc
    session = await st.open_session(
        sid, str(body.get("run_id") or st.settings.default_run_id), task, opened
    )
    return session_info(st, request, session)


async def _bulk(
    items: list[Any], what: str, one: Callable[[Any], Awaitable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Run ``one`` on every item concurrently; an item's GatewayError (or other RllmError,
    as a 500) becomes its result, so one bad item does not refuse the others."""
    if not 0 < len(items) <= MAX_BULK:
        raise GatewayError(400, f"{what} takes 1 to {MAX_BULK} items, got {len(items)}")

    async def guarded_one(item: Any) -> dict[str, Any]:
        try:
            return await one(item)
        except RllmError as exc:
            status = exc.status if isinstance(exc, GatewayError) else 500
            return {"error": {"code": status, "message": f"{exc}"}}

    return list(await asyncio.gather(*(guarded_one(item) for item in items)))


def _check_id(sid: str) -> None:
    reason = unaddressable(sid)
    if reason is not None:
        raise GatewayError(400, reason)


async def open_implicit(st: GatewayState, request: Request, sid: str) -> Session:
    _check_id(sid)
    if st.sessions.is_closed(sid):
        raise GatewayError(409, f"session {sid!r} is closed")
    if not st.settings.implicit_sessions:
        raise GatewayError(404, f"unknown session {sid!r}; open it with POST /sessions")
    if not is_admin(st, request_key(dict(request.headers))):
        raise GatewayError(
            404,
            f"unknown session {sid!r}; open it with POST /sessions (admin key) and call it "
            "with its key; only the admin key opens sessions implicitly",
        )
    run_id = request.headers.get("x-rllm-run-id") or st.settings.default_run_id
    return await st.open_session(sid, run_id, Task(task_id=sid))


async def _publish_before_close(st: GatewayState, session: Session, events: Any) -> None:
    """The close's own ``events`` (a reward, say), each acknowledged in order before
    SessionClosed: one request instead of a ``/v1/events`` call and a close. A bad event
    refuses the whole close, so nothing is published and the session stays open."""
    if events is None:
        return
    if not isinstance(events, list):
        raise GatewayError(400, f"events must be a list of session events, got {events!r:.80}")
    good, errors = validate_events(events, session)
    if errors:
        raise GatewayError(400, f"events refused, the session stays open: {errors}")
    st.settle()  # after the session's steps
    for _, event in good:
        await st.sink.emit(SESSION_EVENTS, event.session_id, event, wait=True)


async def close_one(st: GatewayState, sid: str, key: str | None, body: Any) -> dict[str, Any]:
    """Close ``sid`` with ``body``'s status, output, error and events (published first);
    the answer has its step count and token totals (the upstream's usage, summed)."""
    session = st.sessions.get(sid)
    if session is None:
        if st.sessions.is_closed(sid):
            raise GatewayError(409, f"session {sid!r} is closed")
        raise GatewayError(404, f"unknown session {sid!r}")
    if not may_use(st, session, key):
        raise GatewayError(401, f"wrong key for session {sid!r}")
    if not isinstance(body, dict):
        raise GatewayError(400, f"a close must be a JSON object, got {body!r:.80}")
    try:
        status = SessionStatus(body.get("status", "ok"))
    except ValueError as exc:
        raise GatewayError(
            400,
            f"status must be one of ok, error, timeout, cancelled; got {body.get('status')!r}",
        ) from exc
    await _publish_before_close(st, session, body.get("events"))
    closed = await st.close_session(session, status, body.get("output"), body.get("error"))
    return {
        "session_id": sid,
        "num_steps": closed.num_steps,
        "status": status.value,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
    }


@guarded
async def close_sessions(request: Request) -> Response:
    """``POST /sessions/close``: a list of closes, each ``{"session_id", "api_key"?,
    "status", "output", "error", "events"}`` (the item's key, else the request's); one
    result per item, in order, as from ``POST /sessions/{id}/close`` or an ``error``."""
    st = state_of(request)
    body = await read_json(request, st.settings)
    if not isinstance(body, list):
        raise GatewayError(400, f"POST /sessions/close needs a JSON list, got {body!r:.80}")
    header_key = request_key(dict(request.headers))

    async def one(item: Any) -> dict[str, Any]:
        if not isinstance(item, dict):
            raise GatewayError(400, f"a close must be a JSON object, got a {type(item).__name__}")
        if not isinstance(item.get("session_id"), str):  # the item is not echoed: it has a key
            raise GatewayError(400, f"a close needs a session_id string, got keys {sorted(item)}")
        return await close_one(st, item["session_id"], item.get("api_key") or header_key, item)

    return JSONResponse(await _bulk(body, "POST /sessions/close", one))
