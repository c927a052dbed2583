"""Run untrusted Python in a local sandbox (``rllm.sandboxes``): no network, a time and a
memory limit, nothing of the host but its interpreter.

The sandbox's root is an empty directory (made once under ``$RLLM_HOME/sandboxes``) with
the host's ``/usr`` (and ``/lib*`` where they are directories), ``/etc/ld.so.cache`` and the
base interpreter's prefix bound in read-only; every write lands in the sandbox's own
overlay and goes with it. So the program runs with the host's Python and libraries, offline
and without building an image, but sees no home directory, no ``/tmp`` and no ``/etc``
of the host. It runs as ``nobody`` (65534) inside, which owns only its working directory,
under the sandbox's Docker-default privileges. Needs root and bubblewrap
(``apt-get install -y bubblewrap``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.benchmarks.errors import CodeSandboxError
from rllm.sandboxes import Mount, SandboxSettings, SandboxSpec, get_backend
from rllm.sandboxes import SandboxError as BackendError
from rllm.sandboxes.pool import WarmPool
from rllm.sandboxes.types import ExecResult

__all__ = ["CodeSandboxSettings", "SandboxResult", "base_python", "run_python"]

_TOP_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_WORKDIR = "/sandbox"
_USER = "65534:65534"
"""Who the program runs as: ``nobody``, not the sandbox's root."""


class CodeSandboxSettings(BaseSettings):
    """Limits of the code reward's sandbox (env ``RLLM_SANDBOX_*``)."""

    model_config = SettingsConfigDict(env_prefix="RLLM_SANDBOX_", frozen=True, extra="ignore")

    timeout_s: float = 10.0
    """Wall-clock limit of one run."""
    memory_mb: int = 1024
    """Memory limit of the program (the sandbox is killed past it)."""
    max_output_bytes: int = 1_000_000
    """Stdout/stderr beyond this is cut."""
    python: str = Field(default_factory=lambda: base_python())
    """Interpreter the program runs with: the base interpreter, not the venv's (the
    program needs only the standard library)."""


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
    error: str | None = None
    """Why the sandbox ended it (the memory limit), when not the program's own error."""

    @property
    def error_line(self) -> str:
        """The last line of stderr (the exception, usually), else the sandbox's reason."""
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else (self.error or "")


def base_python() -> str:
    """The real file of the base interpreter behind ``sys.executable``."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _rootfs(home: Path) -> Path:
    """The empty root (mount points and the host's top-level symlinks), made once."""
    root = home / "rootfs" / "code-reward"
    (root / _WORKDIR.strip("/")).mkdir(parents=True, exist_ok=True)
    os.chown(root / _WORKDIR.strip("/"), 65534, 65534)  # the program's user may write there
    if (root / ".ready").exists():
        return root
    for name in ("usr", "etc", "tmp", "proc", "dev", _WORKDIR.strip("/")):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc" / "ld.so.cache").touch()
    for name in _TOP_DIRS:
        host, mine = Path("/") / name, root / name
        if host.is_symlink() and not mine.is_symlink():
            mine.symlink_to(os.readlink(host))
        elif host.is_dir() and not host.is_symlink():
            mine.mkdir(exist_ok=True)
    (root / ".ready").touch()
    return root


def _mounts(python: str) -> tuple[Mount, ...]:
    mounts = [Mount(source=Path("/usr"), target="/usr")]
    mounts += [
        Mount(source=Path("/") / n, target=f"/{n}")
        for n in _TOP_DIRS
        if (Path("/") / n).is_dir() and not (Path("/") / n).is_symlink()
    ]
    if Path("/etc/ld.so.cache").exists():
        mounts.append(Mount(source=Path("/etc/ld.so.cache"), target="/etc/ld.so.cache"))
    prefix = Path(python).resolve().parents[1]
    if not prefix.is_relative_to("/usr"):
        mounts.append(Mount(source=prefix, target=str(prefix)))
    return tuple(mounts)


class _Runner:
    """One event loop thread per process for the code reward's sandboxes: a warm pool keeps
    two ready, and a finished sandbox is closed in the background, so a call costs the
    program's own run plus one handoff."""

    def __init__(self, home: Path, spec: SandboxSpec) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(
            target=self.loop.run_forever, name="rllm-code-sandbox", daemon=True
        ).start()
        self.backend = get_backend("local", SandboxSettings(home=home))
        self.pool = WarmPool(self.backend, spec, size=2, handle_sigterm=False)
        asyncio.run_coroutine_threadsafe(self.pool.start(), self.loop).result()
        self.closing: set[asyncio.Task[None]] = set()

    def run(self, program: str, argv: list[str], stdin: str, timeout: float) -> ExecResult:
        return asyncio.run_coroutine_threadsafe(
            self._run(program, argv, stdin, timeout), self.loop
        ).result()

    async def _run(self, program: str, argv: list[str], stdin: str, timeout: float) -> ExecResult:
        sandbox = await self.pool.acquire()
        try:
            await sandbox.write_file(f"{_WORKDIR}/program.py", program)
            return await sandbox.exec(argv, stdin=stdin, timeout_s=timeout, user=_USER)
        finally:
            task = self.loop.create_task(sandbox.close())
            self.closing.add(task)
            task.add_done_callback(self.closing.discard)


_RUNNERS: dict[str, _Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def _runner(settings: CodeSandboxSettings) -> _Runner:
    home = SandboxSettings().home
    spec = SandboxSpec(
        image=str(_rootfs(home)),
        workdir=_WORKDIR,
        mounts=_mounts(settings.python),
        env={"HOME": _WORKDIR, "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
        memory_mb=settings.memory_mb,
        pids=256,
        output_limit_bytes=settings.max_output_bytes,
        lifetime_s=None,
        labels={"rllm.purpose": "code-reward"},
    )
    with _RUNNERS_LOCK:
        key = f"{home}\0{spec.model_dump_json()}"
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = _Runner(home, spec)
    return runner


def run_python(
    program: str,
    stdin: str = "",
    timeout_s: float | None = None,
    settings: CodeSandboxSettings | None = None,
) -> SandboxResult:
    """Run ``program`` with ``stdin`` in a sandbox of its own (thread-safe).

    Raises:
        CodeSandboxError: bubblewrap is missing, or the sandbox itself failed to start.
    """
    settings = settings or CodeSandboxSettings()
    timeout = timeout_s if timeout_s is not None else settings.timeout_s
    try:
        result = _runner(settings).run(
            program, [settings.python, "-I", "-B", "program.py"], stdin, timeout
        )
    except BackendError as exc:
        raise CodeSandboxError(f"the code sandbox could not run: {exc}") from exc
    killed = result.exit_code == 137 and not result.stderr.strip()
    error = f"killed: over the {settings.memory_mb} MB memory limit" if killed else result.error
    status = "timed out" if result.timed_out else "passed" if result.exit_code == 0 else "failed"
    return SandboxResult(
        status, result.exit_code, result.stdout, result.stderr, result.duration_s, error
    )
