"""Run the gateway with uvicorn."""

from __future__ import annotations

import uvicorn

from rllm.settings import KafkaSettings

from .app import create_app
from .settings import GatewaySettings

__all__ = ["serve"]


def serve(settings: GatewaySettings, kafka: KafkaSettings) -> None:
    """Serve the gateway until interrupted (the spool is drained on the next start)."""
    uvicorn.run(
        create_app(settings, kafka),
        host=settings.host,
        port=settings.port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=10,
    )
