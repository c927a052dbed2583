"""Background services of the local stack (gateway, processors, history, model server):
each runs as ``rllm-cli <command>`` in its own process with a pid file and a log file
under ``$RLLM_HOME/run``, so ``rllm-cli down`` can stop what ``up`` started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from rllm.errors import InfraError

__all__ = ["ServiceSpec", "service_running", "start_service", "stop_service"]


@dataclass(frozen=True)
class ServiceSpec:
    """How to run one service."""

    name: str
    """Short name (pid and log files are named after it)."""
    args: tuple[str, ...]
    """Arguments after ``rllm-cli``."""
    health_url: str | None = None
    """URL answering 200 once the service is ready; None: ready once the process lives."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables."""
    ready_timeout_s: float = 120.0
    """How long to wait for readiness."""


def _run_dir(home: Path) -> Path:
    path = home / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pid(home: Path, name: str) -> int | None:
    pid_file = _run_dir(home) / f"{name}.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return None
    except PermissionError:
        pass
    return pid


def service_running(home: Path, name: str) -> bool:
    """Whether the service's recorded process is alive."""
    return _pid(home, name) is not None


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def start_service(home: Path, spec: ServiceSpec) -> str:
    """Start a service unless it runs; wait until it is ready; return its log path.

    Raises:
        InfraError: with the log's last lines when it exits or is not ready in time.
    """
    log = _run_dir(home) / f"{spec.name}.log"
    if _pid(home, spec.name) is not None:
        return str(log)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rllm.cli", *spec.args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "RLLM_HOME": str(home), **spec.env},
            start_new_session=True,
        )
    (_run_dir(home) / f"{spec.name}.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + spec.ready_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InfraError(f"{spec.name} exited with status {proc.returncode}:\n{_tail(log)}")
        if spec.health_url is None or _healthy(spec.health_url):
            return str(log)
        time.sleep(0.2)
    stop_service(home, spec.name)
    raise InfraError(
        f"{spec.name} was not ready at {spec.health_url} within {spec.ready_timeout_s:.0f} s:\n"
        + _tail(log)
    )


def stop_service(home: Path, name: str, timeout_s: float = 20.0) -> bool:
    """Stop a service (SIGTERM, then SIGKILL); return whether one was running."""
    pid = _pid(home, name)
    if pid is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
    (_run_dir(home) / f"{name}.pid").unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"
