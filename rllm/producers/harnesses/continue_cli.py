"""The ``continue`` harness (npm ``@continuedev/cli``, the ``cn`` command): OpenAI chat,
``cn -p --auto`` (headless, every tool allowed) on the instruction read from stdin.

A Node program: installed on the host with the pinned runtime
(``rllm.producers.harnesses.npm``), bound read-only at ``/opt/rllm/continue``. Fully
local, no Continue account: ``--config`` names a local ``config.yaml`` whose one model is
the session (provider ``openai``, ``apiBase`` its URL, its key), so no hub slug is
resolved and no login is asked for; metrics are off (``CONTINUE_METRICS_ENABLED=0``, and
no OTLP endpoint is set), and headless mode checks for no update. What cannot be turned
off: importing the CLI fires one version ping at ``api.continue.dev`` that is not waited
for; in the sandbox its DNS lookup fails at once and the run goes on. The only traffic the
gateway sees is one streamed ``POST /v1/chat/completions`` a turn.

Its session (every message and tool call, ``<CONTINUE_GLOBAL_DIR>/sessions/<id>.json``)
and its ``cn.log`` are copied under ``/logs/agent`` after the run.
"""

from __future__ import annotations

import json
import shlex

from rllm.producers.harnesses.npm import NodeInstalled
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    AgentSetup,
    HarnessApi,
    ModelEndpoint,
)

__all__ = ["CONTINUE_CONFIG_PATH", "ContinueHarness"]

VERSION = "1.5.47"
"""The pinned npm version."""

CONTINUE_CONFIG_PATH = "/rllm/continue.yaml"
"""The run's ``config.yaml``: the session as its one model."""


class ContinueHarness(NodeInstalled):
    """Continue's CLI in headless mode, its answer, session and log kept as artifacts."""

    name = "continue"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "@continuedev/cli"
    entry = "dist/cn.js"

    @property
    def log_path(self) -> str:
        """Its stdout and stderr: the final answer, errors (an artifact)."""
        return f"{AGENT_LOG_DIR}/continue.log"

    @property
    def global_dir(self) -> str:
        """``CONTINUE_GLOBAL_DIR``, in its home: its sessions (``sessions/<uuid>.json``,
        one a run) and logs."""
        return f"{self.state_dir}/.continue"

    @property
    def session_path(self) -> str:
        """Its session file, copied out after the run (an artifact)."""
        return f"{AGENT_LOG_DIR}/continue-session.json"

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """Its home and global folder, metrics off, no proxy; and ``config.yaml``: one
        model, the session's (``openai`` at its URL with its key), for every role, with
        native tool calls."""
        env = {
            "HOME": self.state_dir,
            "CONTINUE_GLOBAL_DIR": self.global_dir,
            "CONTINUE_METRICS_ENABLED": "0",
            "CONTINUE_CLI_ENABLE_TELEMETRY": "0",
            "NO_PROXY": "*",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
        model = endpoint.model
        lines = [
            "name: rllm",
            "version: 1.0.0",
            "schema: v1",
            "models:",
            f"  - name: {_yaml(model)}",
            "    provider: openai",
            f"    model: {_yaml(model)}",
            f"    apiBase: {_yaml(endpoint.base_url)}",
            f"    apiKey: {_yaml(endpoint.api_key)}",
            "    roles: [chat, edit, apply]",
            "    capabilities: [tool_use]",
        ]
        return AgentSetup(env=env, files={CONTINUE_CONFIG_PATH: "\n".join(lines) + "\n"})

    def command(self, workdir: str) -> str:
        """``cn -p --auto`` with the instruction on stdin, its output to the log; then its
        session and ``cn.log`` copied out, the log's end on stdout, its exit status kept."""
        argv = [self.node, self.script, "-p", "--auto", "--config", CONTINUE_CONFIG_PATH]
        keep = (
            f"cp {self.global_dir}/sessions/*-*.json {self.session_path} 2>/dev/null; "
            f"cp {self.global_dir}/logs/cn.log {AGENT_LOG_DIR}/ 2>/dev/null"
        )
        run = f"{shlex.join(argv)} <{shlex.quote(INSTRUCTION_PATH)}"
        return self.logged_command(run, workdir, then=keep)

    def log_paths(self) -> tuple[str, ...]:
        """Its output, its session and its ``cn.log``."""
        return (self.log_path, self.session_path, f"{AGENT_LOG_DIR}/cn.log")


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)
