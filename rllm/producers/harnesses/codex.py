"""The ``codex`` harness (npm ``@openai/codex``): OpenAI Responses only, ``codex exec
--json`` with approvals and its own sandbox off (the task's sandbox is the sandbox).

Installed on the host with ``npm install --prefix <home>/codex/<version>``; the package
ships Codex as a static (musl) executable in its platform package
(``@openai/codex-linux-x64``), whose ``vendor/<target>`` folder is bound read-only into the
sandbox. ``$CODEX_HOME/config.toml`` (``CODEX_HOME`` is the run's state folder,
``/tmp/rllm-codex``) names one model provider, the session's URL with
``wire_api = "responses"`` (plain HTTP, no WebSocket), its key in ``RLLM_API_KEY``;
update checks, analytics, history and web search are off.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from rllm.producers.harnesses.host import INSTRUCTION_ARGUMENT
from rllm.producers.harnesses.npm import NativeInstalled, npm_arch
from rllm.producers.harnesses.types import AgentSetup, HarnessApi, ModelEndpoint

__all__ = ["CodexHarness"]

VERSION = "0.171.0"
"""The pinned npm version."""

_TRIPLES = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}
"""The Rust target of its static executable, by npm's name of the machine."""


class CodexHarness(NativeInstalled):
    """``codex exec`` on the instruction, its JSON-lines events kept as the agent's log."""

    name = "codex"
    version = VERSION
    api = HarnessApi.RESPONSES
    package = "@openai/codex"
    executable = "bin/codex"

    def binary_dir(self, install_dir: Path) -> Path:
        """The platform package's ``vendor/<target>`` folder under an install folder."""
        triple = _TRIPLES[npm_arch(self.name)]
        return super().binary_dir(install_dir) / "vendor" / triple

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """Its home, the session's key (the provider's ``env_key``), no colour, no proxy;
        and ``config.toml``: the gateway session as the only model provider, Responses
        over HTTP, nothing else that reaches out."""
        env = {
            "CODEX_HOME": self.state_dir,
            "HOME": self.state_dir,
            "RLLM_API_KEY": endpoint.api_key,
            "NO_COLOR": "1",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }
        lines = [
            f"model = {json.dumps(endpoint.model)}",
            'model_provider = "rllm"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'web_search = "disabled"',
            "",
            "[model_providers.rllm]",
            'name = "rllm gateway"',
            f"base_url = {json.dumps(endpoint.base_url)}",
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
        return AgentSetup(env=env, files={f"{self.state_dir}/config.toml": "\n".join(lines) + "\n"})

    def command(self, workdir: str) -> str:
        """``codex exec --json`` from the workdir, its events to the log, the log's end on
        stdout, and its exit status kept."""
        argv = [
            self.executable_path,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-C",
            workdir,
        ]
        run = f"{shlex.join(argv)} {INSTRUCTION_ARGUMENT} </dev/null"
        return self.logged_command(run, workdir)
