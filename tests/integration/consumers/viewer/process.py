"""``rllm-cli view`` in its own process, as a user starts it, for the tests that read its
pages over HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.integration.consumers.viewer.browser import wait_for

__all__ = ["view_process"]


@contextmanager
def view_process(port: int, env: dict[str, str], log_path: Path, *flags: str) -> Iterator[str]:
    """``rllm-cli view --port PORT FLAGS`` with ``env``, its output in ``log_path``: yields
    its URL once it answers ``/healthz`` (a process that exits first fails with its log);
    terminated at the end."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rllm.cli", "view", "--port", str(port), *flags],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:

            def up() -> bool:
                assert proc.poll() is None, log_path.read_text()
                try:
                    return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_for("rllm-cli view to answer", up, 60)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)
