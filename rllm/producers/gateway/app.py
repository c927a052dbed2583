"""The gateway's ASGI app (Starlette): its routes (``session_routes``, ``call_routes``,
``admin``) and its lifecycle (Kafka, spool, upstream pool, policy, idle sessions)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from rllm.errors import ConfigError
from rllm.kafka import EventPublisher, PolicyFollower
from rllm.schemas.types import PolicyUpdated
from rllm.settings import KafkaSettings

from .admin import health, metrics, pause, policy
from .call_routes import plain_call, session_call
from .clock import RequestClock
from .metrics import Metrics
from .policy import PolicySync
from .session_routes import close_sessions, open_sessions
from .settings import GatewaySettings, UpstreamKind
from .sglang import load_tokenizer
from .sink import EventSink
from .spool import Spool
from .state import GatewayState
from .upstreams import Upstream

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
        loop = asyncio.get_running_loop()
        sync = PolicySync(state)

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
        tasks: list[asyncio.Task[Any]] = [
            loop.create_task(_reap(state)),
            loop.create_task(sync.run()),
        ]
        if settings.upstream_kind is not UpstreamKind.HOSTED:  # asked before a call needs it
            tasks.append(loop.create_task(state.upstream.context.context()))
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
            await state.upstream.aclose()
            await sink.stop()

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/sessions", open_sessions, methods=["POST"]),
            Route("/sessions/close", close_sessions, methods=["POST"]),
            Route("/sessions/{rest:path}", session_call, methods=["GET", "POST"]),
            Route("/v1/{api:path}", plain_call, methods=["GET", "POST"]),
            Route("/admin/policy", policy, methods=["GET", "POST"]),
            Route("/admin/pause", pause, methods=["GET", "POST"]),
        ],
        middleware=[Middleware(RequestClock)],
        lifespan=lifespan,
    )


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
