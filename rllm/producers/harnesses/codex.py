"""The ``codex`` harness (npm ``@openai/codex``): OpenAI Responses only, ``codex exec
--json`` with approvals and its own sandbox off (the task's sandbox is the sandbox).

Installed on the host with ``npm install --prefix <home>/codex/<version>``; the package
ships Codex as a static (musl) executable in its platform package
(``@openai/codex-linux-x64``), whose ``vendor/<target>`` folder is bound read-only into the
sandbox. ``$CODEX_HOME/config.toml`` names one model provider, the session's URL with
``wire_api = "responses"`` (plain HTTP, no WebSocket), its key in ``RLLM_API_KEY``;
update checks, analytics, history and web search are off.
"""

from __future__ import annotations

import json
import platform
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, run_install_command
from rllm.producers.harnesses.types import AGENT_LOG_DIR, HarnessApi
from rllm.sandboxes.types import Mount

__all__ = ["CODEX_DIR", "CODEX_HOME", "CodexHarness"]

VERSION = "0.171.0"
"""The pinned npm version."""

PACKAGE = "@openai/codex"

CODEX_DIR = PurePosixPath("/opt/rllm/codex")
"""Where the platform package's ``vendor/<target>`` folder (``bin/codex``) is bound in."""

CODEX_HOME = "/tmp/rllm-codex"
"""``CODEX_HOME`` (and ``HOME``) of the run inside the sandbox: its config and sessions."""

_TARGETS = {"x86_64": ("linux-x64", "x86_64-unknown-linux-musl"),
            "aarch64": ("linux-arm64", "aarch64-unknown-linux-musl")}  # fmt: skip


def _target() -> tuple[str, str]:
    machine = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    target = _TARGETS.get(machine)
    if target is None:
        raise HarnessError(
            f"harness 'codex' has no native build for machine {machine!r}; "
            f"run it on x86_64 or aarch64 Linux"
        )
    return target


class CodexHarness(HostInstalled):
    """``codex exec`` on the instruction, its JSON-lines events kept as the agent's log."""

    name = "codex"
    version = VERSION
    api = HarnessApi.RESPONSES

    @property
    def log_path(self) -> str:
        """Its ``--json`` event stream (an artifact)."""
        return f"{AGENT_LOG_DIR}/codex.jsonl"

    def vendor_dir(self, install_dir: Path) -> Path:
        """The platform package's executable folder under an install folder."""
        suffix, triple = _target()
        return install_dir / "node_modules" / f"{PACKAGE}-{suffix}" / "vendor" / triple

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package; then ``codex --version`` must run."""
        await run_install_command(
            ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
             "--loglevel=error", f"{PACKAGE}@{self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip
        binary = self.vendor_dir(target) / "bin" / "codex"
        if not binary.is_file():
            raise HarnessError(
                f"installing harness 'codex' {self.version}: npm installed no native "
                f"executable at {binary} (was an optional dependency skipped? retry without "
                f"--omit=optional)"
            )
        await run_install_command([str(binary), "--version"], name=self.name, cwd=target,
                                  timeout_s=60)  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The executable's folder at ``/opt/rllm/codex``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.vendor_dir(self.installed_dir()), target=str(CODEX_DIR)),)

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """Its home, the session's key (the provider's ``env_key``), no colour, no proxy."""
        return {
            "CODEX_HOME": CODEX_HOME,
            "HOME": CODEX_HOME,
            "RLLM_API_KEY": api_key,
            "NO_COLOR": "1",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """``config.toml``: the gateway session as the only model provider, Responses over
        HTTP, nothing else that reaches out."""
        lines = [
            f"model = {json.dumps(model)}",
            'model_provider = "rllm"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'web_search = "disabled"',
            "",
            "[model_providers.rllm]",
            'name = "rllm gateway"',
            f"base_url = {json.dumps(gateway_base_url)}",
            'env_key = "RLLM_API_KEY"',
            'wire_api = "responses"',
            "request_max_retries = 1",
            "stream_max_retries = 1",
            "",
            "[history]",
            'persistence = "none"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
        ]
        return {f"{CODEX_HOME}/config.toml": "\n".join(lines) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``codex exec --json`` from the workdir, its events to the log, the log's end on
        stdout, and its exit status kept."""
        argv = [
            f"{CODEX_DIR}/bin/codex", "exec", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "-C", workdir,
        ]  # fmt: skip
        log = shlex.quote(self.log_path)
        prompt = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {CODEX_HOME} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} {prompt} </dev/null >{log} 2>&1; rc=$?; "
                f"tail -c 4000 {log}; exit $rc")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its JSON-lines events."""
        return (self.log_path,)
