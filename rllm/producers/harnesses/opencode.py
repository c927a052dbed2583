"""The ``opencode`` harness (npm ``opencode-ai``): OpenAI chat through a custom
OpenAI-compatible provider (``rllm``), ``opencode run --format json`` with every
permission allowed.

Installed on the host with ``npm install --prefix <home>/opencode/<version>``; the package
ships opencode as one native executable (its platform package ``opencode-linux-x64``:
glibc only), whose folder is bound read-only into the sandbox. Its config
(``OPENCODE_CONFIG``) names the session's URL and key as the provider ``rllm``; the models
catalogue fetch, auto-update, sharing, default plugins, LSP downloads and the project's
own config are off, so the only traffic is the session's model calls.
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

__all__ = ["OPENCODE_CONFIG_PATH", "OPENCODE_DIR", "OpencodeHarness"]

VERSION = "1.18.33"
"""The pinned npm version."""

PACKAGE = "opencode-ai"

OPENCODE_DIR = PurePosixPath("/opt/rllm/opencode")
"""Where the platform package's folder (``bin/opencode``) is bound in."""

STATE_DIR = "/tmp/rllm-opencode"
"""``HOME`` (and the XDG folders) of the run inside the sandbox."""

OPENCODE_CONFIG_PATH = "/rllm/opencode.json"
"""The run's config: the session as the provider ``rllm``."""

PROVIDER = "rllm"
"""The custom provider's id (``rllm/<model>``)."""

_PLATFORMS = {"x86_64": "linux-x64", "amd64": "linux-x64", "aarch64": "linux-arm64",
              "arm64": "linux-arm64"}  # fmt: skip


def _platform_package() -> str:
    machine = platform.machine().lower()
    suffix = _PLATFORMS.get(machine)
    if suffix is None:
        raise HarnessError(
            f"harness 'opencode' has no native build for machine {machine!r}; "
            f"run it on x86_64 or aarch64 Linux"
        )
    return f"opencode-{suffix}"


class OpencodeHarness(HostInstalled):
    """``opencode run`` on the instruction, its JSON events kept as the agent's log."""

    name = "opencode"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT

    @property
    def log_path(self) -> str:
        """Its ``--format json`` events (an artifact)."""
        return f"{AGENT_LOG_DIR}/opencode.jsonl"

    def binary_dir(self, install_dir: Path) -> Path:
        """The platform package's folder under an install folder."""
        return install_dir / "node_modules" / _platform_package()

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package; then ``opencode --version`` must run."""
        await run_install_command(
            ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
             "--loglevel=error", f"{PACKAGE}@{self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip
        binary = self.binary_dir(target) / "bin" / "opencode"
        if not binary.is_file():
            raise HarnessError(
                f"installing harness 'opencode' {self.version}: npm installed no native "
                f"executable at {binary} (was the optional dependency {_platform_package()} "
                f"skipped? retry without --omit=optional)"
            )
        await run_install_command([str(binary), "--version"], name=self.name, cwd=target,
                                  env={"OPENCODE_DISABLE_AUTOUPDATE": "1"},
                                  timeout_s=60)  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The executable's folder at ``/opt/rllm/opencode``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.binary_dir(self.installed_dir()), target=str(OPENCODE_DIR)),)

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """Its config, a writable home, and every switch that keeps it off the network
        but for the gateway."""
        return {
            "OPENCODE_CONFIG": OPENCODE_CONFIG_PATH,
            "HOME": STATE_DIR,
            "XDG_CONFIG_HOME": f"{STATE_DIR}/config",
            "XDG_DATA_HOME": f"{STATE_DIR}/data",
            "XDG_CACHE_HOME": f"{STATE_DIR}/cache",
            "XDG_STATE_HOME": f"{STATE_DIR}/state",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
            "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The provider ``rllm`` (``@ai-sdk/openai-compatible``) at the session's URL with
        its key, its one model for every role, every permission allowed."""
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "rllm gateway",
                    "options": {"baseURL": gateway_base_url, "apiKey": api_key},
                    "models": {model: {"name": model}},
                }
            },
            "model": f"{PROVIDER}/{model}",
            "small_model": f"{PROVIDER}/{model}",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        }
        return {OPENCODE_CONFIG_PATH: json.dumps(config, indent=2) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``opencode run --format json`` from the workdir (a fixed title: no model call
        to make one), its events to the log, the log's end on stdout, its exit status
        kept."""
        argv = [f"{OPENCODE_DIR}/bin/opencode", "run", "--format", "json", "--title", "rllm",
                "--dir", workdir]  # fmt: skip
        log = shlex.quote(self.log_path)
        prompt = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {STATE_DIR} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} {prompt} </dev/null >{log} 2>&1; rc=$?; "
                f"tail -c 4000 {log}; exit $rc")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its JSON events."""
        return (self.log_path,)
