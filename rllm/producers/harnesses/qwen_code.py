"""The ``qwen-code`` harness (npm ``@qwen-code/qwen-code``): OpenAI chat, ``qwen --yolo
--output-format stream-json`` on the instruction read from stdin.

A Node program (it needs Node 22): installed on the host with the pinned runtime
(``rllm.producers.harnesses.npm``), bound read-only at ``/opt/rllm/qwen-code``. The
session's URL, key and model are the ``OPENAI_*`` variables with the ``openai`` auth
type; its system settings file (``QWEN_CODE_SYSTEM_SETTINGS_PATH``, over every other
scope) turns off auto-update checks, usage statistics (sent to Aliyun RUM by default) and
telemetry, so the only traffic is the session's model calls (one streamed ``POST
/v1/chat/completions`` a turn). ``QWEN_CODE_NO_RELAUNCH`` keeps it from relaunching itself
with a heap of half the host's memory, which the sandbox's memory limit would not hold.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from rllm.producers.harnesses.npm import NodeInstalled, npm_arch
from rllm.producers.harnesses.types import (
    INSTRUCTION_PATH,
    AgentSetup,
    HarnessApi,
    ModelEndpoint,
)

__all__ = ["QWEN_SETTINGS_PATH", "QwenCodeHarness"]

VERSION = "0.24.4"
"""The pinned npm version."""

QWEN_SETTINGS_PATH = "/rllm/qwen-code.json"
"""The run's system settings: auth type, model, and everything that reaches out off."""


class QwenCodeHarness(NodeInstalled):
    """Qwen Code in headless mode with every tool approved, its stream-json events kept
    as the agent's log.

    Args:
        max_turns: the most turns of one run.
    """

    name = "qwen-code"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "@qwen-code/qwen-code"
    entry = "cli-entry.js"

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    async def _install_into(self, target: Path) -> None:
        """The package and runtime; then its vendored ``rg`` made executable (npm unpacks
        it 0644, and qwen-code, finding it not executable, falls back to a slower grep;
        it cannot fix the mode itself on a read-only mount)."""
        await super()._install_into(target)
        rg = (
            target
            / "node_modules"
            / self.package
            / "vendor"
            / "ripgrep"
            / f"{npm_arch(self.name)}-linux"
            / "rg"
        )
        if rg.is_file():
            rg.chmod(0o755)

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The session's URL, key and model, its settings and home (its ``.qwen`` folder:
        chats, usage, ids), and every switch that keeps it off the network but for the
        gateway, in the environment; and its system settings: the ``openai`` auth type and
        the session's model; no update check, usage statistics or telemetry."""
        env = {
            "OPENAI_BASE_URL": endpoint.base_url,
            "OPENAI_API_KEY": endpoint.api_key,
            "OPENAI_MODEL": endpoint.model,
            "QWEN_CODE_SYSTEM_SETTINGS_PATH": QWEN_SETTINGS_PATH,
            "HOME": self.state_dir,
            "QWEN_USAGE_STATISTICS_ENABLED": "false",
            "QWEN_CODE_NO_RELAUNCH": "true",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
            "NO_PROXY": "*",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
        settings = {
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": endpoint.model},
            "general": {"enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }
        files = {QWEN_SETTINGS_PATH: json.dumps(settings, indent=2) + "\n"}
        return AgentSetup(env=env, files=files)

    def command(self, workdir: str) -> str:
        """``qwen --yolo -o stream-json`` with the instruction on stdin (no argument
        parsing of its text), its events to the log, the log's end on stdout, its exit
        status kept."""
        argv = [
            self.node,
            self.script,
            "--yolo",
            "--auth-type",
            "openai",
            "--output-format",
            "stream-json",
            "--max-session-turns",
            str(self.max_turns),
        ]
        run = f"{shlex.join(argv)} <{shlex.quote(INSTRUCTION_PATH)}"
        return self.logged_command(run, workdir)
