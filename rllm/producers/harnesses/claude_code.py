"""The ``claude-code`` harness (npm ``@anthropic-ai/claude-code``): Anthropic Messages,
``claude --print --output-format=stream-json`` with every permission granted.

Installed on the host with ``npm install --prefix <home>/claude-code/<version>``; the
package ships Claude Code as one native executable (its platform package,
``@anthropic-ai/claude-code-linux-x64``: glibc only, no node needed), whose folder is
bound read-only into the sandbox. ``ANTHROPIC_BASE_URL`` is the session's URL without
``/v1`` (the CLI appends ``/v1/messages?beta=true``); telemetry, error reports,
auto-updates and every other non-essential request are off, so the only traffic is the
session's model calls (one ``POST /v1/messages`` a turn, streamed). Not ``--bare``: that
mode offers the model three tools only (no ``Write``), unlike the CLI users run.
"""

from __future__ import annotations

import platform
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, run_install_command
from rllm.producers.harnesses.types import AGENT_LOG_DIR, HarnessApi
from rllm.sandboxes.types import Mount

__all__ = ["CLAUDE_HOME", "ClaudeCodeHarness"]

VERSION = "2.1.332"
"""The pinned npm version."""

PACKAGE = "@anthropic-ai/claude-code"

CLAUDE_HOME = PurePosixPath("/opt/rllm/claude-code")
"""Where the platform package's folder (its ``claude`` executable) is bound in."""

STATE_DIR = "/tmp/rllm-claude-code"
"""``HOME`` of the run inside the sandbox (Claude Code writes its settings and sessions)."""

_PLATFORMS = {"x86_64": "linux-x64", "amd64": "linux-x64", "aarch64": "linux-arm64",
              "arm64": "linux-arm64"}  # fmt: skip


def _platform_package() -> str:
    machine = platform.machine().lower()
    suffix = _PLATFORMS.get(machine)
    if suffix is None:
        raise HarnessError(
            f"harness 'claude-code' has no native build for machine {machine!r}; "
            f"run it on x86_64 or aarch64 Linux"
        )
    return f"{PACKAGE}-{suffix}"


class ClaudeCodeHarness(HostInstalled):
    """Claude Code in print mode, its stream-json transcript kept as the agent's log.

    Args:
        max_turns: the most agentic turns of one run.
    """

    name = "claude-code"
    version = VERSION
    api = HarnessApi.ANTHROPIC

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    @property
    def log_path(self) -> str:
        """Its stream-json transcript (an artifact)."""
        return f"{AGENT_LOG_DIR}/claude-code.jsonl"

    def binary_dir(self, install_dir: Path) -> Path:
        """The platform package's folder under an install folder."""
        return install_dir / "node_modules" / _platform_package()

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package; then its executable must answer
        ``--version`` with that version."""
        await run_install_command(
            ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
             "--loglevel=error", f"{PACKAGE}@{self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip
        binary = self.binary_dir(target) / "claude"
        if not binary.is_file():
            raise HarnessError(
                f"installing harness 'claude-code' {self.version}: npm installed no native "
                f"executable at {binary} (was the optional dependency {_platform_package()} "
                f"skipped? retry without --omit=optional)"
            )
        await run_install_command([str(binary), "--version"], name=self.name, cwd=target,
                                  env={"DISABLE_AUTOUPDATER": "1"}, timeout_s=60)  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The native executable's folder at ``/opt/rllm/claude-code``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.binary_dir(self.installed_dir()), target=str(CLAUDE_HOME)),)

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The session's URL (without ``/v1``) and key, the model for every role, and
        every switch that keeps it off the network but for the gateway."""
        return {
            "ANTHROPIC_BASE_URL": gateway_base_url.removesuffix("/").removesuffix("/v1"),
            "ANTHROPIC_API_KEY": api_key,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "HOME": STATE_DIR,
            "CLAUDE_CONFIG_DIR": f"{STATE_DIR}/.claude",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "IS_SANDBOX": "1",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """None: everything is in the environment and on the command line."""
        return {}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``claude --print`` on the instruction, its transcript to the log, the log's end
        on stdout, and its exit status kept."""
        argv = [
            f"{CLAUDE_HOME}/claude", "--print", "--output-format=stream-json", "--verbose",
            "--dangerously-skip-permissions", "--max-turns", str(self.max_turns),
        ]  # fmt: skip
        log = shlex.quote(self.log_path)
        prompt = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {STATE_DIR} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} {prompt} </dev/null >{log} 2>&1; rc=$?; "
                f"tail -c 4000 {log}; exit $rc")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its stream-json transcript."""
        return (self.log_path,)
