"""The call routes: ``/sessions/{id}/v1/{api}`` (and the session's close and info) and
``/v1/{api}`` with a session's key; both end in ``dispatch.handle_call``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rllm.producers.gateway.admin import guarded, is_admin, may_use, require_admin, state_of
from rllm.producers.gateway.clock import timing_of
from rllm.producers.gateway.dispatch import API_PATHS, handle_call
from rllm.producers.gateway.errors import GatewayError
from rllm.producers.gateway.ingest import ingest_events
from rllm.producers.gateway.routing import parse_session_path, redacted_query, request_key
from rllm.producers.gateway.session_routes import close_one, open_implicit, session_info
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.upstreams import UpstreamFailure
from rllm.producers.gateway.validation import read_json, validate_call

__all__ = ["header_dict", "plain_call", "session_call"]


@guarded
async def session_call(request: Request) -> Response:
    st = state_of(request)
    route = parse_session_path(request.path_params["rest"])
    if route is None:
        raise GatewayError(404, "no session id in the path")
    headers = header_dict(request)
    key = request_key(headers)
    session = st.sessions.get(route.session_id)
    if route.action == "close":
        body = await read_json(request, st.settings, allow_empty=True) or {}
        return JSONResponse(await close_one(st, route.session_id, key, body))
    if route.action == "info":
        if session is None or not may_use(st, session, key):
            raise GatewayError(
                404,
                f"unknown session {route.session_id!r}, or not yours: its info is shown only "
                "with its key or the admin key",
            )
        return JSONResponse({**session_info(st, request, session), "api_key": None})
    if session is not None and not may_use(st, session, key):
        raise GatewayError(401, f"wrong key for session {route.session_id!r}")
    if session is None:
        # a call that would be refused opens nothing: its body is read and checked first
        body = await _call_body(st, request, route.api_path)
        session = await open_implicit(st, request, route.session_id)
        return await _api(st, request, headers, session, route.api_path, body)
    return await _api(st, request, headers, session, route.api_path)


@guarded
async def plain_call(request: Request) -> Response:
    st = state_of(request)
    api_path = request.path_params["api"].strip("/")
    headers = header_dict(request)
    key = request_key(headers)
    session = st.sessions.by_key(key) if key else None
    if api_path == "events":
        if session is None:
            require_admin(st, request)
        body = await read_json(request, st.settings)
        status, answer = await ingest_events(st, body, session)
        return JSONResponse(answer, status_code=status)
    if session is None:
        if api_path == "models" and is_admin(st, key):
            return await _api(st, request, headers, None, api_path)
        raise GatewayError(
            401, "no open session has this key; use the session's key or /sessions/{id}/v1"
        )
    return await _api(st, request, headers, session, api_path)


def header_dict(request: Request) -> dict[str, str]:
    """The request's headers by (lower-case) name, decoded once; of a repeated one, the
    first (as Starlette's ``Headers`` reads it)."""
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(request.scope["headers"])}


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
    headers: dict[str, str],
    session: Session | None,
    api_path: str,
    body: Any = None,
) -> Response:
    """Serve ``/v1/{api_path}`` for ``session``; ``body`` when it was read (and checked)."""
    if api_path == "models":
        try:
            # any replica lists the same model: the least loaded live one
            upstream = st.replicas.least_loaded().upstream
            resp = await upstream.forward("GET", "/v1/models", b"", headers)
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
        st,
        session,
        api,
        path,
        body,
        headers,
        timing_of(request),
        lambda: _gone(request),
        redacted_query(request.url.query),
    )
    st.metrics.inc("rllm_gateway_requests_total", api=api.value, status=str(response.status_code))
    return response
