"""Harnesses installed from PyPI on the host (``aider``, ``kimi-cli``, ``mini-swe-agent``,
``terminus-2``): a venv under ``<home>/<name>/<version>`` made by a self-contained
interpreter (rllm's own base interpreter, or pyenv's of the Python a CLI needs), the
pinned packages pip-installed into it, and the system libraries that interpreter's
``ssl`` and ``ctypes`` link to copied next to it (``copy_python_libraries``).

The interpreter's prefix and the install folder are bound read-only into the sandbox (as
the ``bash`` harness binds its interpreter); the CLI runs as ``python -S`` with
``PYTHONPATH`` on the venv's ``site-packages``, so neither the host's ``/usr`` nor a
global ``site-packages`` shadows anything, and ``LD_LIBRARY_PATH`` finds ``libpython``
and the copied libraries.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path, PurePosixPath

from rllm.producers.harnesses.host import HostInstalled, run_install_command
from rllm.producers.harnesses.loop import PYTHON_PREFIX, host_python, pyenv_python
from rllm.sandboxes.types import Mount

__all__ = ["PYTHON_MODULES", "VenvInstalled", "copy_python_libraries"]

PYTHON_MODULES = (
    "_ssl",
    "_hashlib",
    "_ctypes",
    "_lzma",
    "_bz2",
    "_sqlite3",
    "_uuid",
    "zlib",
    "pyexpat",
    "_decimal",
)
"""The host interpreter's extension modules whose system libraries (libssl, libffi, ...) a
task image may lack: ``copy_python_libraries`` copies them next to the install."""

VERSION_TIMEOUT_S = 120.0
"""The most an installed CLI's ``--version`` may take (importing it is slow)."""

_GLIBC = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux", "linux-vdso")
"""Libraries every image has (its own glibc wins)."""


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


class VenvInstalled(HostInstalled):
    """A CLI pip-installed into a venv (``venv/``, and ``lib/``: the interpreter's system
    libraries) bound in at ``/opt/rllm/<name>``, the interpreter's prefix at
    ``python_prefix_dir``."""

    package = ""
    """Its PyPI distribution, installed at the harness's version."""
    requirements: tuple[str, ...] = ()
    """Other pinned requirements installed with it."""
    python: str | None = None
    """The Python it needs (``"3.13"``, from pyenv); None: rllm's own."""
    python_prefix_dir: PurePosixPath = PYTHON_PREFIX
    """Where the interpreter's prefix is bound in."""
    version_command: tuple[str, ...] = ()
    """A check run after the install (``("kimi", "--version")``: its first word is in the
    venv's ``bin``); none when empty."""

    def interpreter(self) -> tuple[Path, Path]:
        """The interpreter that makes the venv and runs the CLI, and its prefix.

        Raises:
            HarnessError: there is none (the Python named, and how to install it), or
                rllm's own lives under ``/usr``.
        """
        return pyenv_python(self.python) if self.python else host_python()

    @property
    def site_packages(self) -> str:
        """The venv's ``site-packages``, relative to the install folder."""
        minor = self.python or f"{sys.version_info.major}.{sys.version_info.minor}"
        return f"venv/lib/python{minor}/site-packages"

    async def _install_into(self, target: Path) -> None:
        """The interpreter's system libraries, a venv from it with the pinned packages,
        what ``_complete`` adds; then ``version_command`` must run."""
        python, prefix = self.interpreter()
        await copy_python_libraries(prefix, target / "lib")
        venv = target / "venv"
        await run_install_command(
            [str(python), "-m", "venv", str(venv)], name=self.name, cwd=target
        )
        await run_install_command(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"{self.package}=={self.version}",
                *self.requirements,
            ],
            name=self.name,
            cwd=target,
        )
        await self._complete(target)
        if self.version_command:
            command, *args = self.version_command
            await run_install_command(
                [str(venv / "bin" / command), *args],
                name=self.name,
                cwd=target,
                timeout_s=VERSION_TIMEOUT_S,
            )

    async def _complete(self, target: Path) -> None:
        """What the install adds after pip (nothing here)."""

    def mounts(self) -> tuple[Mount, ...]:
        """The interpreter's prefix at ``python_prefix_dir`` and the install folder at
        ``/opt/rllm/<name>``, read-only.

        Raises:
            HarnessError: it is not installed, or there is no such interpreter.
        """
        _, prefix = self.interpreter()
        return (
            Mount(source=prefix, target=str(self.python_prefix_dir)),
            Mount(source=self.installed_dir(), target=str(self.bound_dir)),
        )

    def python_environment(self) -> dict[str, str]:
        """``PYTHONPATH`` on the bound venv's ``site-packages``, ``LD_LIBRARY_PATH`` on the
        bound prefix's ``lib`` and the copied libraries."""
        return {
            "PYTHONPATH": f"{self.bound_dir}/{self.site_packages}",
            "LD_LIBRARY_PATH": f"{self.python_prefix_dir}/lib:{self.bound_dir}/lib",
        }

    def sandbox_python(self) -> str:
        """The bound interpreter's executable inside the sandbox."""
        python, prefix = self.interpreter()
        return str(self.python_prefix_dir / python.relative_to(prefix))
