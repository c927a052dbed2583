"""Serve the viewer with uvicorn until interrupted."""

from __future__ import annotations

import uvicorn

from rllm.consumers.history import HistorySettings
from rllm.consumers.viewer.app import create_app
from rllm.consumers.viewer.settings import ViewerSettings
from rllm.consumers.viewer.source import HistorySource

__all__ = ["serve"]


def serve(settings: ViewerSettings, history: HistorySettings) -> None:
    """Serve the viewer over ``history`` on ``settings.host:port``.

    Raises:
        ConfigError: for a non-loopback host without ``insecure``.
    """
    settings.check_host()
    source = HistorySource(history)
    try:
        uvicorn.run(
            create_app(source, settings, where=source.where),
            host=settings.host,
            port=settings.port,
            log_level="info",
            access_log=False,
            proxy_headers=False,
        )
    finally:
        source.close()
