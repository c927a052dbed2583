"""The ``kilocode`` harness (npm ``@kilocode/cli``, an opencode fork): OpenAI chat through a
custom OpenAI-compatible provider (``rllm``), ``kilo run --auto --format json`` with every
permission allowed.

Installed on the host with ``npm install --prefix <home>/kilocode/<version>``; the package
ships Kilo as one native executable (its platform package ``@kilocode/cli-linux-x64``:
glibc only), whose folder is bound read-only into the sandbox. Its config
(``KILO_CONFIG``) names the session's URL and key as the provider ``rllm``, the only one
enabled; the models catalogue fetch, auto-update, the daemon, sharing and session ingest,
PostHog telemetry (``KILO_TELEMETRY_LEVEL``), OpenTelemetry, default plugins, LSP
downloads and the project's own config are off, so the only traffic is the session's model
calls; a failed call is retried once (``KILO_SESSION_RETRY_LIMIT``), so an unreachable
gateway ends the run instead of Kilo waiting for the network until the timeout.
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

__all__ = ["KILO_CONFIG_PATH", "KILO_DIR", "KilocodeHarness"]

VERSION = "7.7.7"
"""The pinned npm version: the newest whose platform package (``@kilocode/cli-linux-x64``)
the npm registry reached from these machines serves alongside it (it has no 7.8.1 build
of ``@kilocode/cli-linux-x64``, so 7.8.1's postinstall fails)."""

PACKAGE = "@kilocode/cli"

KILO_DIR = PurePosixPath("/opt/rllm/kilocode")
"""Where the platform package's folder (``bin/kilo``) is bound in."""

STATE_DIR = "/tmp/rllm-kilocode"
"""``HOME`` (and the XDG folders) of the run inside the sandbox."""

KILO_CONFIG_PATH = "/rllm/kilo.json"
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
            f"harness 'kilocode' has no native build for machine {machine!r}; "
            f"run it on x86_64 or aarch64 Linux"
        )
    return f"{PACKAGE}-{suffix}"


class KilocodeHarness(HostInstalled):
    """``kilo run`` on the instruction, its JSON events kept as the agent's log."""

    name = "kilocode"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT

    @property
    def log_path(self) -> str:
        """Its ``--format json`` events (an artifact)."""
        return f"{AGENT_LOG_DIR}/kilocode.jsonl"

    def binary_dir(self, install_dir: Path) -> Path:
        """The platform package's folder under an install folder."""
        return install_dir / "node_modules" / _platform_package()

    async def _install_into(self, target: Path) -> None:
        """``npm install`` of the pinned package; then ``kilo --version`` must run."""
        await run_install_command(
            ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
             "--loglevel=error", f"{PACKAGE}@{self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip
        binary = self.binary_dir(target) / "bin" / "kilo"
        if not binary.is_file():
            raise HarnessError(
                f"installing harness 'kilocode' {self.version}: npm installed no native "
                f"executable at {binary} (was the optional dependency {_platform_package()} "
                f"skipped? retry without --omit=optional)"
            )
        await run_install_command([str(binary), "--version"], name=self.name, cwd=target,
                                  env={"KILO_DISABLE_AUTOUPDATE": "1", "KILO_NO_DAEMON": "1",
                                       "KILO_TELEMETRY_LEVEL": "off"},
                                  timeout_s=60)  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The executable's folder at ``/opt/rllm/kilocode``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        return (Mount(source=self.binary_dir(self.installed_dir()), target=str(KILO_DIR)),)

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """Its config, a writable home, and every switch that keeps it off the network
        but for the gateway."""
        return {
            "KILO_CONFIG": KILO_CONFIG_PATH,
            "HOME": STATE_DIR,
            "XDG_CONFIG_HOME": f"{STATE_DIR}/config",
            "XDG_DATA_HOME": f"{STATE_DIR}/data",
            "XDG_CACHE_HOME": f"{STATE_DIR}/cache",
            "XDG_STATE_HOME": f"{STATE_DIR}/state",
            "KILO_AUTH_CONTENT": "{}",
            "KILO_TELEMETRY_LEVEL": "off",
            "KILO_NO_DAEMON": "1",
            "KILO_PURE": "1",
            "KILO_SESSION_RETRY_LIMIT": "1",
            "KILO_DISABLE_MODELS_FETCH": "1",
            "KILO_DISABLE_AUTOUPDATE": "1",
            "KILO_DISABLE_SHARE": "1",
            "KILO_DISABLE_SESSION_INGEST": "1",
            "KILO_DISABLE_DEFAULT_PLUGINS": "1",
            "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_PROJECT_CONFIG": "1",
            "KILO_DISABLE_CLAUDE_CODE": "1",
            "KILO_DISABLE_EXTERNAL_SKILLS": "1",
            "KILO_DISABLE_TERMINAL_TITLE": "1",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The provider ``rllm`` (``@ai-sdk/openai-compatible``) at the session's URL with
        its key, the only provider enabled, its one model for every role, no workspace
        snapshots (nothing to undo in a run), every permission allowed."""
        config = {
            "$schema": "https://app.kilo.ai/config.json",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "rllm gateway",
                    "options": {"baseURL": gateway_base_url, "apiKey": api_key},
                    "models": {model: {"name": model}},
                }
            },
            "enabled_providers": [PROVIDER],
            "model": f"{PROVIDER}/{model}",
            "small_model": f"{PROVIDER}/{model}",
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "experimental": {"openTelemetry": False},
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        }
        return {KILO_CONFIG_PATH: json.dumps(config, indent=2) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``kilo run --auto --format json`` from the workdir (a fixed title: no model call
        to make one), its events to the log, the log's end on stdout, its exit status
        kept."""
        argv = [f"{KILO_DIR}/bin/kilo", "run", "--auto", "--format", "json", "--title", "rllm",
                "--dir", workdir]  # fmt: skip
        log = shlex.quote(self.log_path)
        prompt = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {STATE_DIR} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} {prompt} </dev/null >{log} 2>&1; rc=$?; "
                f"tail -c 4000 {log}; exit $rc")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its JSON events."""
        return (self.log_path,)
