"""Run untrusted Python in a bubblewrap sandbox: no network, a time and a memory limit.

The program runs as ``bwrap --unshare-all`` (own network, PID, IPC namespaces, so no
network at all) over a read-only view of the file system with a private writable ``/tmp``
and work folder, under ``prlimit`` (address space, CPU seconds, file size, processes).
Install bubblewrap with ``apt-get install -y bubblewrap``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.benchmarks.errors import SandboxError

__all__ = ["SandboxResult", "SandboxSettings", "run_python"]


class SandboxSettings(BaseSettings):
    """Limits of the code sandbox (env ``RLLM_SANDBOX_*``)."""

    model_config = SettingsConfigDict(env_prefix="RLLM_SANDBOX_", frozen=True)

    timeout_s: float = 10.0
    """Wall-clock limit of one run."""
    memory_mb: int = 1024
    """Address-space limit of the program."""
    max_output_bytes: int = 1_000_000
    """Stdout/stderr beyond this is cut."""
    python: str = Field(default_factory=lambda: base_python())
    """Interpreter the program runs with: the base interpreter, not the venv's (the
    program needs only the standard library, and a venv may live under /tmp, which the
    sandbox replaces with an empty tmpfs)."""


@dataclass(frozen=True)
class SandboxResult:
    """How one sandboxed run ended."""

    status: str
    """``passed`` (exit 0), ``failed`` (non-zero exit) or ``timed out``."""
    returncode: int | None
    """Exit status; None when killed on timeout."""
    stdout: str
    """Standard output (cut at the limit)."""
    stderr: str
    """Standard error (cut at the limit)."""
    duration_s: float
    """Wall-clock seconds."""

    @property
    def error_line(self) -> str:
        """The last line of stderr (the exception, usually)."""
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else ""


def _tools() -> tuple[str, str]:
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        raise SandboxError("bubblewrap (bwrap) is not installed; the code grader runs programs "
                           "only inside it: apt-get install -y bubblewrap")
    if prlimit is None:
        raise SandboxError("prlimit (util-linux) is not installed; apt-get install -y util-linux")
    return bwrap, prlimit


def base_python() -> str:
    """The real file of the base interpreter behind ``sys.executable``."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _command(workdir: Path, settings: SandboxSettings, timeout_s: float) -> list[str]:
    bwrap, prlimit = _tools()
    memory = settings.memory_mb * 1024 * 1024
    # an interpreter installed under /tmp stays visible (read-only) over the tmpfs
    prefix = Path(settings.python).resolve().parents[1]
    keep = ["--ro-bind", str(prefix), str(prefix)] if prefix.is_relative_to("/tmp") else []
    return [
        bwrap, "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *keep,
        "--bind", str(workdir), "/tmp/sandbox", "--chdir", "/tmp/sandbox",
        "--setenv", "HOME", "/tmp/sandbox", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        prlimit, f"--as={memory}", f"--cpu={int(timeout_s) + 1}", "--fsize=67108864",
        "--nproc=256", "--",
        settings.python, "-I", "-B", "program.py",
    ]


def run_python(program: str, stdin: str = "", timeout_s: float | None = None,
               settings: SandboxSettings | None = None) -> SandboxResult:
    """Run ``program`` with ``stdin`` in the sandbox.

    Raises:
        SandboxError: bubblewrap or prlimit is missing, or the sandbox itself failed.
    """
    settings = settings or SandboxSettings()
    timeout = timeout_s if timeout_s is not None else settings.timeout_s
    with tempfile.TemporaryDirectory(prefix="rllm-sandbox-") as tmp:
        workdir = Path(tmp)
        (workdir / "program.py").write_text(program, encoding="utf-8")
        command = _command(workdir, settings, timeout)
        start = time.monotonic()
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(stdin.encode(), timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = None
        elapsed = time.monotonic() - start
    limit = settings.max_output_bytes
    stderr = err[:limit].decode("utf-8", "replace")
    if code is not None and code != 0 and stderr.startswith("bwrap:"):
        raise SandboxError(f"the sandbox failed to start: {stderr.strip()}")
    status = "timed out" if code is None else ("passed" if code == 0 else "failed")
    return SandboxResult(status, code, out[:limit].decode("utf-8", "replace"), stderr, elapsed)
