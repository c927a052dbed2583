"""Shared handler plumbing (errors, admin checks) and the admin endpoints: health,
metrics, policy version, pause."""

from __future__ import annotations

import hmac
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from rllm.errors import RllmError

from .errors import GatewayError
from .routing import request_key
from .sessions import Session
from .state import GatewayState
from .validation import read_json

__all__ = [
    "error_response",
    "guarded",
    "health",
    "is_admin",
    "may_use",
    "metrics",
    "pause",
    "policy",
    "require_admin",
    "set_version",
    "state_of",
]


def error_response(exc: GatewayError) -> Response:
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after else None
    return JSONResponse(
        {"error": {"message": exc.message, "type": "gateway_error", "code": exc.status}},
        status_code=exc.status,
        headers=headers,
    )


def is_admin(state: GatewayState, key: str | None) -> bool:
    admin = state.settings.admin_key
    if admin is None:
        return True
    return key is not None and hmac.compare_digest(admin.get_secret_value().encode(), key.encode())


def require_admin(state: GatewayState, request: Request) -> None:
    if not is_admin(state, request_key(dict(request.headers))):
        raise GatewayError(401, "this endpoint needs the gateway's admin key")


def may_use(state: GatewayState, session: Session, key: str | None) -> bool:
    if state.settings.admin_key is None or is_admin(state, key):
        return True
    return key is not None and hmac.compare_digest(session.key.encode(), key.encode())


def set_version(state: GatewayState, version: int) -> None:
    state.policy_version = max(state.policy_version, version)


def state_of(request: Request) -> GatewayState:
    state: GatewayState = request.app.state.gw
    return state


def guarded(handler: Any) -> Any:
    """Answer GatewayErrors with their status, other RllmErrors (an event over the size
    limit, Kafka refusing a record) with 500 and their message."""

    async def wrapped(request: Request) -> Response:
        try:
            response: Response = await handler(request)
            return response
        except RllmError as exc:
            if not isinstance(exc, GatewayError):
                exc = GatewayError(500, f"{type(exc).__name__}: {exc}")
            state_of(request).metrics.inc(
                "rllm_gateway_requests_total", api="gateway", status=str(exc.status)
            )
            return error_response(exc)

    return wrapped


@guarded
async def health(request: Request) -> Response:
    st = state_of(request)
    return JSONResponse(
        {
            "status": "ok",
            "spool_depth": st.sink.spool.depth,
            "spooling": st.sink.spooling,
            "open_sessions": len(st.sessions),
            "policy_version": st.policy_version,
            "paused": st.paused,
            "capture": st.settings.capture.value,
            "upstream_kind": st.settings.upstream_kind.value,
        }
    )


@guarded
async def metrics(request: Request) -> Response:
    return PlainTextResponse(
        state_of(request).metrics.render(), media_type="text/plain; version=0.0.4"
    )


@guarded
async def policy(request: Request) -> Response:
    st = state_of(request)
    if request.method == "POST":
        require_admin(st, request)
        body = await read_json(request, st.settings.max_body_bytes)
        version = body.get("version") if isinstance(body, dict) else None
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise GatewayError(400, f"version must be a non-negative integer, got {version!r}")
        if version < st.policy_version:
            raise GatewayError(
                409, f"policy version {version} is older than the current {st.policy_version}"
            )
        st.policy_version = version
    return JSONResponse({"policy_version": st.policy_version})


@guarded
async def pause(request: Request) -> Response:
    st = state_of(request)
    if request.method == "POST":
        require_admin(st, request)
        body = await read_json(request, st.settings.max_body_bytes)
        paused = body.get("paused") if isinstance(body, dict) else None
        if not isinstance(paused, bool):
            raise GatewayError(400, f"paused must be true or false, got {paused!r}")
        st.paused = paused
    return JSONResponse({"paused": st.paused})
