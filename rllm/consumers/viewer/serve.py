"""Serve the viewer with uvicorn until interrupted."""

from __future__ import annotations

import errno
import socket

import httpx
import uvicorn

from rllm.consumers.history import HistorySettings
from rllm.consumers.viewer.app import VIEWER_HEADER, create_app
from rllm.consumers.viewer.settings import ViewerSettings
from rllm.consumers.viewer.source import HistorySource
from rllm.errors import ConfigError

__all__ = ["already_serving", "serve"]


def already_serving(settings: ViewerSettings) -> bool:
    """Whether a viewer already answers on ``settings``' host and port (False: it is free).

    Raises:
        ConfigError: another program holds the port.
    """
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((settings.host, settings.port))
            return False
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    try:
        ours = httpx.get(f"{settings.base_url}/healthz", timeout=3).headers.get(VIEWER_HEADER)
    except httpx.HTTPError:
        ours = None
    if ours == "1":
        return True
    raise ConfigError(
        f"port {settings.port} on {settings.host} is held by another program (not an rllm "
        "viewer): choose another with --port or RLLM_VIEW_PORT"
    )


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
