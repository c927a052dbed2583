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

import shlex

from rllm.producers.harnesses.host import INSTRUCTION_ARGUMENT
from rllm.producers.harnesses.npm import NativeInstalled
from rllm.producers.harnesses.types import AgentSetup, HarnessApi, ModelEndpoint

__all__ = ["ClaudeCodeHarness"]

VERSION = "2.1.332"
"""The pinned npm version."""


class ClaudeCodeHarness(NativeInstalled):
    """Claude Code in print mode, its stream-json transcript kept as the agent's log.

    Args:
        max_turns: the most agentic turns of one run.
    """

    name = "claude-code"
    version = VERSION
    api = HarnessApi.ANTHROPIC
    package = "@anthropic-ai/claude-code"
    executable = "claude"
    version_env = {"DISABLE_AUTOUPDATER": "1"}

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The session's URL (without ``/v1``) and key, the model for every role, and
        every switch that keeps it off the network but for the gateway, in the
        environment; no config file (the rest is on the command line)."""
        model = endpoint.model
        env = {
            "ANTHROPIC_BASE_URL": endpoint.base_url.removesuffix("/").removesuffix("/v1"),
            "ANTHROPIC_API_KEY": endpoint.api_key,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "HOME": self.state_dir,
            "CLAUDE_CONFIG_DIR": f"{self.state_dir}/.claude",
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
        return AgentSetup(env=env)

    def command(self, workdir: str) -> str:
        """``claude --print`` on the instruction, its transcript to the log, the log's end
        on stdout, and its exit status kept."""
        argv = [
            self.executable_path,
            "--print",
            "--output-format=stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--max-turns",
            str(self.max_turns),
        ]
        run = f"{shlex.join(argv)} {INSTRUCTION_ARGUMENT} </dev/null"
        return self.logged_command(run, workdir)
