"""Shared handler plumbing (errors, admin checks) and the admin endpoints: health,
metrics, policy version, pause."""

from __future__ import annotations

import hmac
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from rllm.errors import MessageTooLargeError, RllmError
from rllm.producers.gateway.errors import GatewayError, anthropic_error
from rllm.producers.gateway.policy import upstream_policy
from rllm.producers.gateway.routing import request_key
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.validation import TOO_DEEP, read_json
from rllm.schemas.lineage import PolicyPointer

__all__ = [
    "error_response",
    "guarded",
    "health",
    "is_admin",
    "is_anthropic",
    "may_use",
    "metrics",
    "pause",
    "policy",
    "require_admin",
    "state_of",
]

log = logging.getLogger("rllm.gateway")


def is_anthropic(request: Request) -> bool:
    """Whether the request is an Anthropic Messages call (its errors take that shape)."""
    return request.url.path.rstrip("/").endswith("/v1/messages")


def error_response(exc: GatewayError, request: Request | None = None) -> Response:
    """The JSON answer of a refused request: Anthropic-shaped on ``/v1/messages``,
    OpenAI-shaped elsewhere."""
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after else {}
    if exc.close:
        headers["connection"] = "close"
    body: dict[str, Any]
    if request is not None and is_anthropic(request):
        body = anthropic_error(exc.status, exc.message)
    else:
        body = {"error": {"message": exc.message, "type": "gateway_error", "code": exc.status}}
    return JSONResponse(body, status_code=exc.status, headers=headers or None)


def is_admin(state: GatewayState, key: str | None) -> bool:
    """Whether ``key`` is the admin key (constant-time); every caller is, when insecure."""
    admin = state.settings.admin_key
    if admin is None:
        return state.settings.insecure
    return key is not None and hmac.compare_digest(admin.get_secret_value().encode(), key.encode())


def require_admin(state: GatewayState, request: Request) -> None:
    if not is_admin(state, request_key(dict(request.headers))):
        raise GatewayError(401, "this endpoint needs the gateway's admin key")


def may_use(state: GatewayState, session: Session, key: str | None) -> bool:
    """Whether ``key`` is the admin key or ``session``'s own key (constant-time)."""
    if is_admin(state, key):
        return True
    return key is not None and hmac.compare_digest(session.key.encode(), key.encode())


def state_of(request: Request) -> GatewayState:
    state: GatewayState = request.app.state.gw
    return state


def _as_gateway_error(exc: Exception) -> GatewayError:
    """The status and reason an exception from a handler is answered with."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, MessageTooLargeError):
        return GatewayError(413, f"{exc}; raise RLLM_MAX_MESSAGE_BYTES or send less")
    if isinstance(exc, RecursionError):
        return GatewayError(400, TOO_DEEP)
    if isinstance(exc, RllmError):
        return GatewayError(500, f"{type(exc).__name__}: {exc}")
    log.exception("unexpected error in %s", type(exc).__name__)
    return GatewayError(500, f"internal gateway error ({type(exc).__name__}); see the log")


def guarded(handler: Any) -> Any:
    """Answer every error as JSON: GatewayErrors with their status, an event over the size
    limit with 413, JSON nested too deeply with 400, anything else with 500 (logged)."""

    async def wrapped(request: Request) -> Response:
        try:
            response: Response = await handler(request)
            return response
        except Exception as exc:  # every refusal is answered as JSON, never plain text
            error = _as_gateway_error(exc)
            state_of(request).metrics.inc(
                "rllm_gateway_requests_total", api="gateway", status=str(error.status)
            )
            return error_response(error, request)

    return wrapped


@guarded
async def health(request: Request) -> Response:
    """The gateway's state. ``policy_version`` / ``policy_run``: what the upstream reports
    serving, which steps are stamped with; ``announced_policy_version`` / ``_run``: the
    newest ``rllm.policy-updates`` names, which differs while the upstream has not loaded
    it (or could not)."""
    st = state_of(request)
    return JSONResponse(
        {
            "status": "ok",
            "spool_depth": st.sink.spool.depth,
            "spooling": st.sink.spooling,
            "open_sessions": len(st.sessions),
            "policy_version": st.policy_version,
            "policy_run": st.policy.run_id if st.policy else None,
            "announced_policy_version": st.announced.version if st.announced else None,
            "announced_policy_run": st.announced.run_id if st.announced else None,
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
    """GET: the version steps are stamped with and its run, the upstream's own (when it
    reports one), the one ``rllm.policy-updates`` names (adopted once served), and this
    gateway's id (the ``gateway_id`` of its ``PolicyServed`` records).
    POST ``{"version": N[, "run_id": R]}``: set it by hand (a trainer without Kafka).
    Both need the admin key."""
    st = state_of(request)
    require_admin(st, request)
    if request.method == "POST":
        body = await read_json(request, st.settings)
        version = body.get("version") if isinstance(body, dict) else None
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise GatewayError(400, f"version must be a non-negative integer, got {version!r}")
        run = body.get("run_id", st.policy.run_id if st.policy else "")
        if not isinstance(run, str):
            raise GatewayError(400, f"run_id must be a string, got {run!r}")
        same_run = st.policy is None or st.policy.run_id == run
        if same_run and version < st.policy_version:
            raise GatewayError(
                409, f"policy version {version} is older than the current {st.policy_version}"
            )
        st.policy = st.announced = PolicyPointer(run, version)
        st.policy_version = version
        for replica in st.replicas:
            replica.policy, replica.policy_version = st.policy, version
    _, served = await upstream_policy(st)
    return JSONResponse(
        {
            "policy_version": st.policy_version,
            "policy_run": st.policy.run_id if st.policy else None,
            "upstream_policy_version": served.version if served else None,
            "upstream_policy_run": served.run_id if served else None,
            "announced_policy_version": st.announced.version if st.announced else None,
            "announced_policy_run": st.announced.run_id if st.announced else None,
            "gateway_id": st.gateway_id,
            "replicas": [
                {
                    "url": r.url,
                    "live": r.live,
                    "down_reason": r.down_reason,
                    "policy_version": r.policy_version,
                    "policy_run": r.policy.run_id if r.policy else None,
                    "sessions": r.sessions,
                    "in_flight": r.in_flight,
                    "sync_error": None
                    if r.sync_error is None
                    else {"version": r.sync_error[0].version, "reason": r.sync_error[1]},
                }
                for r in st.replicas
            ],
            "sync_error": None
            if st.sync_error is None
            else {
                "run_id": st.sync_error[0].run_id,
                "version": st.sync_error[0].version,
                "reason": st.sync_error[1],
            },
        }
    )


@guarded
async def pause(request: Request) -> Response:
    """GET: whether calls are refused (429) while weights are swapped; POST
    ``{"paused": bool}``: set it. Both need the admin key."""
    st = state_of(request)
    require_admin(st, request)
    if request.method == "POST":
        body = await read_json(request, st.settings)
        paused = body.get("paused") if isinstance(body, dict) else None
        if not isinstance(paused, bool):
            raise GatewayError(400, f"paused must be true or false, got {paused!r}")
        st.paused = paused
    return JSONResponse({"paused": st.paused})
