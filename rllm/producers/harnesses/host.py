"""Harnesses installed on the host and bound read-only into the sandbox: where they live
(``$RLLM_HARNESS_HOME``, else ``$RLLM_HOME/harnesses``), the one install routine they
share (a lock, a fresh folder, the harness's commands, a marker written last), and the
shape of their command lines (``HostInstalled.logged_command``). How a package gets in
is ``npm``'s or ``pypi``'s.

The agent's run reaches only the gateway, so nothing is installed at run time: the host
installs with its network (npm, PyPI), once per version, and every sandbox binds that
folder in read-only.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    Harness,
    HarnessBase,
    InstallsOnHost,
)
from rllm.settings import default_home

__all__ = [
    "INSTALLED_MARKER",
    "INSTRUCTION_ARGUMENT",
    "HostInstalled",
    "harnesses_home",
    "install",
    "is_installed",
    "run_install_command",
]

INSTALLED_MARKER = ".rllm-installed"
"""Written last in an install folder: its presence means the install is complete."""

OUTPUT_CHARS = 2000
"""How much of a failed install command's output its error keeps."""

LOG_TAIL_BYTES = 4000
"""How much of its log a ``HostInstalled.logged_command`` prints when the agent is done (the runner
keeps the end of the agent's output)."""

BOUND_ROOT = PurePosixPath("/opt/rllm")
"""Where host installs are bound in the sandbox, one folder a harness."""


def harnesses_home() -> Path:
    """Where host-installed harnesses live: ``$RLLM_HARNESS_HOME``, else
    ``$RLLM_HOME/harnesses`` (``~/.rllm/harnesses``)."""
    env = os.environ.get("RLLM_HARNESS_HOME")
    return Path(env).expanduser() if env else default_home() / "harnesses"


def is_installed(harness: Harness, home: Path) -> bool:
    """Whether ``harness`` is installed under ``home``; True for one without a host
    install (``InstallsOnHost``)."""
    return not isinstance(harness, InstallsOnHost) or harness.is_installed(home)


async def install(harness: Harness, home: Path) -> None:
    """Install ``harness`` under ``home`` when it installs on the host; else nothing.

    Raises:
        HarnessError: the install failed (the command, its status and output named).
    """
    if isinstance(harness, InstallsOnHost):
        await harness.install(home)


async def run_install_command(
    argv: Sequence[str],
    *,
    name: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 900.0,
) -> None:
    """Run one install command on the host.

    Raises:
        HarnessError: it is missing, exited non-zero or ran past ``timeout_s`` (the
            command, its status and the end of its output named).
    """
    shown = " ".join(argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except FileNotFoundError as exc:
        raise HarnessError(
            f"installing harness {name!r}: {argv[0]!r} is not on this machine ({exc}); "
            f"install it (npm: apt-get install -y nodejs npm) and retry"
        ) from exc
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise HarnessError(
            f"installing harness {name!r}: `{shown}` ran past {timeout_s:g} s and was killed; "
            f"check the registry is reachable from this host"
        ) from exc
    if proc.returncode != 0:
        tail = out.decode(errors="replace")[-OUTPUT_CHARS:]
        raise HarnessError(
            f"installing harness {name!r}: `{shown}` exited {proc.returncode}: {tail}"
        )


INSTRUCTION_ARGUMENT = f'"$(cat {shlex.quote(INSTRUCTION_PATH)})"'
"""The instruction's text as one shell word, for a CLI that takes its prompt as an
argument."""


class HostInstalled(HarnessBase):
    """A harness installed on the host under ``<home>/<name>/<version>``: ``_install_into``
    fills a fresh folder; ``is_installed`` and ``install`` are shared. Nothing goes into
    the sandbox snapshot: the install (or part of it) is bound in at ``bound_dir``, and the
    run's writable home is ``state_dir``."""

    name = "host"
    version = "0"

    @property
    def bound_dir(self) -> PurePosixPath:
        """Where it is bound in the sandbox: ``/opt/rllm/<name>``."""
        return BOUND_ROOT / self.name

    @property
    def state_dir(self) -> str:
        """The run's writable ``HOME`` in the sandbox: ``/tmp/rllm-<name>``."""
        return f"/tmp/rllm-{self.name}"

    @property
    def log_path(self) -> str:
        """Its own log, ``/logs/agent/<name>.jsonl`` (an artifact)."""
        return f"{AGENT_LOG_DIR}/{self.name}.jsonl"

    def log_paths(self) -> tuple[str, ...]:
        """Its own log."""
        return (self.log_path,)

    def logged_command(self, run: str, workdir: str, *, stderr: bool = True, then: str = "") -> str:
        """``run`` from ``workdir`` (``state_dir`` made first), its stdout, and its stderr
        unless ``stderr`` is False, to ``log_path``; then ``then``; then the log's end on
        stdout; the exit status is ``run``'s.

        Args:
            run: the agent's command line with its stdin redirection.
            workdir: the task's working directory.
            stderr: whether its stderr goes to the log too (else to the runner).
            then: a command run after it, whatever its status (copying logs out).
        """
        kept = shlex.quote(self.log_path)
        redirect = f">{kept} 2>&1" if stderr else f">{kept}"
        after = f"{then}; " if then else ""
        return (
            f"mkdir -p {self.state_dir} && cd {shlex.quote(workdir)} && {run} {redirect}; "
            f"rc=$?; {after}tail -c {LOG_TAIL_BYTES} {kept}; exit $rc"
        )

    def install_dir(self, home: Path) -> Path:
        """Its install folder under ``home``."""
        return home / self.name / self.version

    def is_installed(self, home: Path) -> bool:
        """Whether ``install`` finished under ``home``."""
        return (self.install_dir(home) / INSTALLED_MARKER).is_file()

    async def install(self, home: Path) -> None:
        """Install under ``home``, once: a lock keeps concurrent installers (processes too)
        apart, a half-done folder is removed and redone, the marker is written last.

        Raises:
            HarnessError: an install command failed.
        """
        target = self.install_dir(home)
        target.parent.mkdir(parents=True, exist_ok=True)
        lock_path = target.parent / f".{self.version}.lock"
        with lock_path.open("a") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            try:
                if self.is_installed(home):
                    return
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                began = time.monotonic()
                await self._install_into(target)
                seconds = time.monotonic() - began
                (target / INSTALLED_MARKER).write_text(
                    f"{self.name} {self.version} {seconds:.1f}s\n"
                )
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def installed_dir(self) -> Path:
        """Its install folder under ``harnesses_home()``, installed.

        Raises:
            HarnessError: it is not installed there (what to run is named).
        """
        home = harnesses_home()
        if not self.is_installed(home):
            raise HarnessError(
                f"harness {self.name!r} {self.version} is not installed under {home}; run "
                f"`rllm-cli harness install {self.name}` (the runner installs it before a run)"
            )
        return self.install_dir(home)

    async def _install_into(self, target: Path) -> None:
        raise NotImplementedError
