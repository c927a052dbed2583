"""Serve any ASGI app with uvicorn in a daemon thread on 127.0.0.1 (tests, perf scripts)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Literal

import uvicorn

__all__ = ["ThreadedServer", "free_port"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # run in a thread: no signal handlers
        pass


class ThreadedServer:
    """Any ASGI app served by uvicorn in a daemon thread on 127.0.0.1; ``stop()`` ends it."""

    def __init__(
        self, app: Any, port: int | None = None, lifespan: Literal["auto", "on", "off"] = "off"
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan=lifespan
        )
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="uvicorn-test")
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"server did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (its lifespan shutdown runs) and join its thread."""
        self._server.should_exit = True
        self._thread.join(timeout=60)
