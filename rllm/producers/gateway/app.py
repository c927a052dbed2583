"""The gateway's ASGI app: its routes (``session_routes``, ``call_routes``, ``admin``) and
its lifecycle (Kafka, spool, upstream pool, policy, idle sessions). LLM calls go straight
to their handler; the other routes and the lifespan through Starlette's router."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rllm.errors import ConfigError
from rllm.kafka import EventPublisher, PolicyFollower
from rllm.producers.gateway.admin import health, metrics, pause, policy
from rllm.producers.gateway.call_routes import plain_call, session_call
from rllm.producers.gateway.clock import stamp
from rllm.producers.gateway.metrics import Metrics
from rllm.producers.gateway.policy import PolicyTracker
from rllm.producers.gateway.replicas import Replica, ReplicaSet
from rllm.producers.gateway.session_routes import close_sessions, open_sessions
from rllm.producers.gateway.settings import GatewaySettings, UpstreamKind
from rllm.producers.gateway.sglang import load_tokenizer
from rllm.producers.gateway.sink import EventSink
from rllm.producers.gateway.spool import Spool
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.upstreams import Upstream
from rllm.schemas.policy import PolicyUpdated
from rllm.settings import KafkaSettings

__all__ = ["GatewayApp", "create_app"]

log = logging.getLogger("rllm.gateway")


def create_app(
    settings: GatewaySettings,
    kafka: KafkaSettings,
) -> GatewayApp:
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
    lifespan = functools.partial(_lifespan, settings, kafka, tokenizer)
    return GatewayApp(Starlette(routes=_routes(), lifespan=lifespan))


def _routes() -> list[Route]:
    return [
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/sessions", open_sessions, methods=["POST"]),
        Route("/sessions/close", close_sessions, methods=["POST"]),
        Route("/sessions/{rest:path}", session_call, methods=["GET", "POST"]),
        Route("/v1/{api:path}", plain_call, methods=["GET", "POST"]),
        Route("/admin/policy", policy, methods=["GET", "POST"]),
        Route("/admin/pause", pause, methods=["GET", "POST"]),
    ]


@contextlib.asynccontextmanager
async def _lifespan(
    settings: GatewaySettings,
    kafka: KafkaSettings,
    tokenizer: Any,
    app: Starlette,
) -> AsyncIterator[None]:
    """The gateway's lifespan: its state, sink, policy follower and background tasks."""
    state, sink, upstreams = _open_state(settings, kafka, tokenizer)
    loop = asyncio.get_running_loop()
    sync = PolicyTracker(state)

    def offered(records: list[PolicyUpdated], _caught_up: bool) -> None:  # follower's thread
        for record in records:
            loop.call_soon_threadsafe(sync.offer, record)

    follower = None
    if settings.follow_policy_updates:
        follower = PolicyFollower(kafka, offered, name="gateway").start()
    app.state.gw = state
    if settings.insecure and settings.admin_key is None:
        log.warning(
            "INSECURE: the gateway on %s runs without an admin key; anyone who reaches it "
            "may open, call, read and close any session (started with --insecure)",
            settings.base_url,
        )
    sink.start()
    tasks = _background(state, sync, upstreams)
    if sink.spooling:
        log.info(
            "spool %s holds %d events from a previous run; draining",
            sink.spool.path,
            sink.spool.depth,
        )
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        if follower is not None:
            follower.stop()
        for upstream in upstreams:
            await upstream.aclose()
        state.settle()
        await sink.stop()


def _background(
    state: GatewayState, sync: PolicyTracker, upstreams: list[Upstream]
) -> list[asyncio.Task[Any]]:
    """The lifespan's tasks: reaping idle sessions, policy sync, each upstream's context
    length (asked before a call needs it) and, with replicas, their probe."""
    loop, settings = asyncio.get_running_loop(), state.settings
    tasks: list[asyncio.Task[Any]] = [loop.create_task(_reap(state)), loop.create_task(sync.run())]
    if settings.upstream_kind is not UpstreamKind.HOSTED:
        tasks += [loop.create_task(up.context.context()) for up in upstreams]
    if len(upstreams) > 1:
        tasks.append(loop.create_task(state.replicas.probe(settings.replica_probe_s)))
    return tasks


def _open_state(
    settings: GatewaySettings,
    kafka: KafkaSettings,
    tokenizer: Any,
) -> tuple[GatewayState, EventSink, list[Upstream]]:
    """The gateway's state for one lifespan: its event sink (publisher and spool), one
    upstream per replica, and the gauges its metrics read."""
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
    upstreams = [Upstream(settings, tokenizer, url) for url in settings.replicas]
    state = GatewayState(
        settings,
        upstreams[0],
        sink,
        counters,
        policy_version=settings.policy_version,
        replicas=ReplicaSet([Replica(upstream) for upstream in upstreams]),
    )
    counters.gauge(
        "rllm_gateway_spool_depth", "Events waiting in the spool.", lambda: sink.spool.depth
    )
    counters.gauge("rllm_gateway_open_sessions", "Open sessions.", lambda: len(state.sessions))
    counters.gauge(
        "rllm_gateway_live_replicas",
        "Upstream replicas routed to (not taken out after a failure).",
        lambda: len(state.replicas.live),
    )
    counters.gauge(
        "rllm_gateway_policy_version", "Current policy version.", lambda: state.policy_version
    )
    return state, sink, upstreams


class GatewayApp:
    """The gateway's ASGI app. An LLM call (``/sessions/{id}/...``, ``/v1/...``) goes
    straight to its handler, skipping the router's regular expressions and Starlette's two
    middleware layers (~0.1 ms a call); the other routes and the lifespan go through
    ``app``. Every HTTP request's arrival is stamped (``clock``)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.state: State = app.state
        """The Starlette app's state (``state.gw`` while it runs)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stamp(scope)
        path, handler = scope["path"], None
        if scope["method"] in ("GET", "POST"):
            if path.startswith("/sessions/") and path != "/sessions/close":
                handler, params = session_call, {"rest": path[len("/sessions/") :]}
            elif path.startswith("/v1/"):
                handler, params = plain_call, {"api": path[len("/v1/") :]}
        if handler is None:
            await self.app(scope, receive, send)
            return
        scope["app"] = self.app
        scope["path_params"] = params
        response = await handler(Request(scope, receive, send))
        await response(scope, receive, send)


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
