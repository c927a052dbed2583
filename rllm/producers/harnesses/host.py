"""Harnesses installed on the host and bound read-only into the sandbox: where they live
(``$RLLM_HARNESS_HOME``, else ``$RLLM_HOME/harnesses``), and the one install routine they
share (a lock, a fresh folder, the harness's commands, a marker written last).

The agent's run reaches only the gateway, so nothing is installed at run time: the host
installs with its network (npm, PyPI), once per version, and every sandbox binds that
folder in read-only.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rllm.producers.harnesses.errors import HarnessError
from rllm.settings import default_home

__all__ = [
    "INSTALLED_MARKER",
    "HostInstalled",
    "copy_python_libraries",
    "harnesses_home",
    "run_install_command",
]

INSTALLED_MARKER = ".rllm-installed"
"""Written last in an install folder: its presence means the install is complete."""

OUTPUT_CHARS = 2000
"""How much of a failed install command's output its error keeps."""

PYTHON_MODULES = ("_ssl", "_hashlib", "_ctypes", "_lzma", "_bz2", "_sqlite3", "_uuid", "zlib",
                  "pyexpat", "_decimal")  # fmt: skip
"""The host interpreter's extension modules whose system libraries (libssl, libffi, ...) a
task image may lack: ``copy_python_libraries`` copies them next to the install."""

_GLIBC = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux", "linux-vdso")
"""Libraries every image has (its own glibc wins)."""


def harnesses_home() -> Path:
    """Where host-installed harnesses live: ``$RLLM_HARNESS_HOME``, else
    ``$RLLM_HOME/harnesses`` (``~/.rllm/harnesses``)."""
    env = os.environ.get("RLLM_HARNESS_HOME")
    return Path(env).expanduser() if env else default_home() / "harnesses"


async def run_install_command(
    argv: Sequence[str], *, name: str, cwd: Path, env: Mapping[str, str] | None = None,
    timeout_s: float = 900.0,
) -> None:  # fmt: skip
    """Run one install command on the host.

    Raises:
        HarnessError: it is missing, exited non-zero or ran past ``timeout_s`` (the
            command, its status and the end of its output named).
    """
    shown = " ".join(argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
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


async def copy_python_libraries(prefix: Path, dest: Path) -> list[str]:
    """Copy the system libraries that the host interpreter's ``PYTHON_MODULES`` link to
    (not glibc's) into ``dest``, so that the interpreter bound into an image without them
    (no libssl3 in plain Debian) still imports ``ssl``; their names, sorted."""
    dynload = next(prefix.glob("lib/python3*/lib-dynload"), None)
    if dynload is None:
        return []
    found = [f for m in PYTHON_MODULES for f in dynload.glob(f"{m}.*.so")]
    if not found:
        return []
    proc = await asyncio.create_subprocess_exec(
        "ldd", *map(str, found), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    dest.mkdir(parents=True, exist_ok=True)
    copied: set[str] = set()
    for line in out.decode(errors="replace").splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        path = rest.split(" (")[0].strip()
        if not arrow or not path.startswith("/") or name.startswith(_GLIBC):
            continue
        if Path(path).is_relative_to(prefix):
            continue  # the bound prefix brings its own (libpython)
        shutil.copy2(path, dest / name)
        copied.add(name)
    return sorted(copied)


class HostInstalled:
    """A harness installed on the host under ``<home>/<name>/<version>``: ``_install_into``
    fills a fresh folder; ``is_installed`` and ``install`` are shared. Nothing goes into
    the sandbox snapshot."""

    name = "host"
    version = "0"

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
