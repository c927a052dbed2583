"""Run the gateway with uvicorn: uvloop's event loop and httptools' HTTP parser where they
are installed (measured by ``perf/gateway.py``, they take ~0.8 ms of CPU off each call),
else asyncio's and h11."""

from __future__ import annotations

import importlib.util
import logging

import uvicorn

from rllm.producers.gateway.app import create_app
from rllm.producers.gateway.settings import GatewaySettings
from rllm.settings import KafkaSettings

__all__ = ["serve", "server_stack"]

log = logging.getLogger("rllm.gateway")


def server_stack() -> tuple[str, str]:
    """The event loop and HTTP parser uvicorn will use: ``("uvloop", "httptools")`` when
    both are installed."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return loop, http


def serve(settings: GatewaySettings, kafka: KafkaSettings) -> None:
    """Serve the gateway until interrupted (the spool is drained on the next start)."""
    loop, http = server_stack()
    log.info("serving with the %s event loop and the %s HTTP parser", loop, http)
    uvicorn.run(
        create_app(settings, kafka),
        host=settings.host,
        port=settings.port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=10,
        loop=loop,
        http=http,
        proxy_headers=False,  # the gateway never reads the client's address
    )
