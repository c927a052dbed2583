"""The gateway's ASGI app (Starlette): routes, auth, body limits, lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rllm.errors import ConfigError, RllmError
from rllm.kafka import EventPublisher
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionOpened, SessionStatus, Task
from rllm.settings import KafkaSettings

from .admin import (
    guarded,
    health,
    is_admin,
    may_use,
    metrics,
    pause,
    policy,
    require_admin,
    set_policy,
    state_of,
)
from .calls import API_PATHS, handle_call
from .clock import RequestClock, timing_of
from .errors import GatewayError
from .ingest import ingest_events, validate_events
from .metrics import Metrics
from .policy import PolicyFollower
from .routing import parse_session_path, request_key
from .sessions import Session
from .settings import GatewaySettings, UpstreamKind
from .sglang import load_tokenizer
from .sink import EventSink
from .spool import Spool
from .state import GatewayState
from .upstreams import Upstream, UpstreamFailure
from .validation import read_json, validate_call

__all__ = ["create_app"]

log = logging.getLogger("rllm.gateway")


def create_app(
    settings: GatewaySettings,
    kafka: KafkaSettings,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """Build the gateway app; Kafka, spool and upstream pool start with its lifespan. An
    sglang upstream's tokenizer is loaded here, before the first request.

    Raises:
        ConfigError: no admin key and not ``insecure``; an sglang upstream without a
            tokenizer, or one that cannot be loaded.
    """
    if settings.admin_key is None and not settings.insecure:
        raise ConfigError(
            "the gateway needs an admin key: pass --admin-key or RLLM_GATEWAY_ADMIN_KEY "
            "(rllm-cli gateway and rllm-cli up use $RLLM_HOME/gateway/admin-key), or "
            "--insecure / RLLM_GATEWAY_INSECURE=1 to serve every session to anyone"
        )
    sglang = settings.upstream_kind is UpstreamKind.SGLANG
    tokenizer = load_tokenizer(settings.tokenizer) if sglang else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        counters = Metrics()
        overrides: dict[str, Any] = {
            "message.timeout.ms": int(settings.ack_timeout_s * 1000),
            "reconnect.backoff.max.ms": 1000,
            "linger.ms": settings.linger_ms,
        }
        publisher = EventPublisher(kafka, None, **overrides)
        sink = EventSink(
            publisher,
            Spool(settings.spool_dir, settings.spool_fsync),
            counters,
            settings.ack_timeout_s,
            settings.drain_interval_s,
        )
        state = GatewayState(
            settings,
            Upstream(settings, transport, tokenizer),
            sink,
            counters,
            policy_version=settings.policy_version,
        )
        counters.gauge(
            "rllm_gateway_spool_depth", "Events waiting in the spool.", lambda: sink.spool.depth
        )
        counters.gauge("rllm_gateway_open_sessions", "Open sessions.", lambda: len(state.sessions))
        counters.gauge(
            "rllm_gateway_policy_version", "Current policy version.", lambda: state.policy_version
        )
        follower = None
        if settings.follow_policy_updates:
            follower = PolicyFollower(kafka, lambda rec: set_policy(state, rec))
            follower.start()
        app.state.gw = state
        if settings.insecure and settings.admin_key is None:
            log.warning(
                "INSECURE: the gateway on %s runs without an admin key; anyone who reaches it "
                "may open, call, read and close any session (started with --insecure)",
                settings.base_url,
            )
        sink.start()
        reaper = asyncio.get_running_loop().create_task(_reap(state))
        if sink.spooling:
            log.info(
                "spool %s holds %d events from a previous run; draining",
                sink.spool.path,
                sink.spool.depth,
            )
        try:
            yield
        finally:
            reaper.cancel()
            if follower is not None:
                follower.stop()
            await state.upstream.aclose()
            await sink.stop()

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/sessions", _open, methods=["POST"]),
            Route("/sessions/close", _close_many, methods=["POST"]),
            Route("/sessions/{rest:path}", _session_path, methods=["GET", "POST"]),
            Route("/v1/{api:path}", _plain_v1, methods=["GET", "POST"]),
            Route("/admin/policy", policy, methods=["GET", "POST"]),
            Route("/admin/pause", pause, methods=["GET", "POST"]),
        ],
        middleware=[Middleware(RequestClock)],
        lifespan=lifespan,
    )


def _session_info(st: GatewayState, request: Request, session: Session) -> dict[str, Any]:
    base = (st.settings.public_url or str(request.base_url)).rstrip("/")
    return {
        "session_id": session.session_id,
        "run_id": session.run_id,
        "base_url": f"{base}/sessions/{quote(session.session_id, safe='/:')}/v1",
        "api_key": session.key,
        "num_steps": session.num_steps,
    }


async def _reap(state: GatewayState) -> None:
    timeout = state.settings.idle_timeout_s
    if not timeout:
        return
    while True:
        await asyncio.sleep(min(max(timeout / 4, 0.05), 30.0))
        try:
            await state.reap_idle()
        except Exception:  # the reaper must survive; it logs and retries
            log.exception("closing idle sessions failed")


MAX_BULK = 1024
"""Most sessions one bulk ``POST /sessions`` or ``POST /sessions/close`` may name."""


@guarded
async def _open(request: Request) -> Response:
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
    import uuid

    sid = str(body.get("session_id") or uuid.uuid4().hex)
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
    return _session_info(st, request, session)


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


async def _implicit(st: GatewayState, request: Request, sid: str) -> Session:
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
    for _, event in good:
        await st.sink.emit(SESSION_EVENTS, event.session_id, event, wait=True)


async def _close_one(st: GatewayState, sid: str, key: str | None, body: Any) -> dict[str, Any]:
    """Close ``sid`` with ``body``'s status, output, error and events (published first)."""
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
    return {"session_id": sid, "num_steps": closed.num_steps, "status": status.value}


@guarded
async def _close_many(request: Request) -> Response:
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
        return await _close_one(st, item["session_id"], item.get("api_key") or header_key, item)

    return JSONResponse(await _bulk(body, "POST /sessions/close", one))


@guarded
async def _session_path(request: Request) -> Response:
    st = state_of(request)
    route = parse_session_path(request.path_params["rest"])
    if route is None:
        raise GatewayError(404, "no session id in the path")
    key = request_key(dict(request.headers))
    session = st.sessions.get(route.session_id)
    if route.action == "close":
        body = await read_json(request, st.settings, allow_empty=True) or {}
        return JSONResponse(await _close_one(st, route.session_id, key, body))
    if route.action == "info":
        if session is None or not may_use(st, session, key):
            raise GatewayError(
                404,
                f"unknown session {route.session_id!r}, or not yours: its info is shown only "
                "with its key or the admin key",
            )
        return JSONResponse({**_session_info(st, request, session), "api_key": None})
    if session is not None and not may_use(st, session, key):
        raise GatewayError(401, f"wrong key for session {route.session_id!r}")
    if session is None:
        # a call that would be refused opens nothing: its body is read and checked first
        body = await _call_body(st, request, route.api_path)
        session = await _implicit(st, request, route.session_id)
        return await _api(st, request, session, route.api_path, body)
    return await _api(st, request, session, route.api_path)


@guarded
async def _plain_v1(request: Request) -> Response:
    st = state_of(request)
    api_path = request.path_params["api"].strip("/")
    key = request_key(dict(request.headers))
    session = st.sessions.by_key(key) if key else None
    if api_path == "events":
        if session is None:
            require_admin(st, request)
        body = await read_json(request, st.settings)
        status, answer = await ingest_events(st, body, session)
        return JSONResponse(answer, status_code=status)
    if session is None:
        if api_path == "models" and is_admin(st, key):
            return await _api(st, request, None, api_path)
        raise GatewayError(
            401, "no open session has this key; use the session's key or /sessions/{id}/v1"
        )
    return await _api(st, request, session, api_path)


async def _gone(request: Request) -> None:
    """Return once the client has disconnected (the body is read: the next ASGI message is
    ``http.disconnect``)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _call_body(st: GatewayState, request: Request, api_path: str) -> Any:
    """The checked body of an API call (None for ``GET /v1/models``, which has none)."""
    api = API_PATHS.get(api_path)
    if api is None or request.method != "POST":
        return None
    body = await read_json(request, st.settings)
    validate_call(api, body)
    return body


async def _api(
    st: GatewayState,
    request: Request,
    session: Session | None,
    api_path: str,
    body: Any = None,
) -> Response:
    """Serve ``/v1/{api_path}`` for ``session``; ``body`` when it was read (and checked)."""
    headers = dict(request.headers)
    if api_path == "models":
        try:
            resp = await st.upstream.forward("GET", "/v1/models", b"", headers)
        except UpstreamFailure as failure:
            return Response(failure.body, status_code=failure.status, media_type="application/json")
        return Response(
            resp.content, status_code=resp.status_code, media_type=resp.headers.get("content-type")
        )
    api = API_PATHS.get(api_path)
    if api is None or request.method != "POST" or session is None:
        raise GatewayError(404, f"unknown API {request.method} /v1/{api_path}")
    if st.paused:
        raise GatewayError(
            429,
            "the gateway is paused while weights are swapped; retry later",
            retry_after=st.settings.pause_retry_after_s,
        )
    if body is None:
        body = await _call_body(st, request, api_path)
    path = f"/v1/{api_path}"
    response = await handle_call(
        st, session, api, path, body, headers, timing_of(request), lambda: _gone(request)
    )
    st.metrics.inc("rllm_gateway_requests_total", api=api.value, status=str(response.status_code))
    return response
