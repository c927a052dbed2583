"""The ``mini-swe-agent`` harness (PyPI ``mini-swe-agent``): one bash code block a turn,
OpenAI chat through litellm, run non-interactively (``--yolo --exit-immediately``).

It is installed on the host into a venv under ``<home>/mini-swe-agent/<version>`` made by
the host's base interpreter; the venv's ``site-packages`` and that interpreter are bound
read-only into the sandbox (``rllm.producers.harnesses.pypi``), and the agent runs as
``python -S -m minisweagent.run.mini`` with ``PYTHONPATH`` on the venv. litellm makes no
network call at start: the local cost map, no telemetry, cost tracking errors ignored.
"""

from __future__ import annotations

import json
import shlex

from rllm.producers.harnesses.host import INSTRUCTION_ARGUMENT
from rllm.producers.harnesses.pypi import VenvInstalled
from rllm.producers.harnesses.types import AGENT_LOG_DIR, AgentSetup, HarnessApi, ModelEndpoint

__all__ = ["MINI_CONFIG_PATH", "MiniSweAgentHarness"]

VERSION = "2.4.6"
"""The pinned PyPI version."""

MINI_CONFIG_PATH = "/rllm/mini-swe-agent.yaml"
"""The run's config (the session's model, URL and key), merged over ``mini_textbased``."""


class MiniSweAgentHarness(VenvInstalled):
    """mini-swe-agent's text-based agent (``litellm_textbased``): a ```mswea_bash_command```
    block a reply, ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` to finish.

    Args:
        step_limit: the most model calls of one run (0: no limit).
    """

    name = "mini-swe-agent"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "mini-swe-agent"

    def __init__(self, step_limit: int = 50) -> None:
        self.step_limit = step_limit

    @property
    def log_path(self) -> str:
        """Its trajectory file (an artifact)."""
        return f"{AGENT_LOG_DIR}/mini-swe-agent.traj.json"

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The bound interpreter's paths, a writable home for its global config (``.env``),
        the key and URL litellm reads, and every switch that keeps litellm and
        mini-swe-agent off the network and quiet, in the environment; and its config's
        model section: ``openai/<model>`` at the session's URL with its key; no cost limit
        (the scripted and local models have no price)."""
        env = {
            **self.python_environment(),
            "HOME": self.state_dir,
            "OPENAI_API_KEY": endpoint.api_key,
            "OPENAI_API_BASE": endpoint.base_url,
            "OPENAI_BASE_URL": endpoint.base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "MSWEA_GLOBAL_CONFIG_DIR": self.state_dir,
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_CONFIGURED": "true",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }
        lines = [
            "agent:",
            f"  step_limit: {self.step_limit}",
            "  cost_limit: 0",
            "model:",
            f"  model_name: {_yaml(f'openai/{endpoint.model}')}",
            "  cost_tracking: ignore_errors",
            "  model_kwargs:",
            f"    api_base: {_yaml(endpoint.base_url)}",
            f"    api_key: {_yaml(endpoint.api_key)}",
        ]
        return AgentSetup(env=env, files={MINI_CONFIG_PATH: "\n".join(lines) + "\n"})

    def command(self, workdir: str) -> str:
        """``mini`` on the instruction, no confirmation, exiting when it submits."""
        argv = [
            self.sandbox_python(),
            "-S",
            "-B",
            "-m",
            "minisweagent.run.mini",
            "--model-class",
            "litellm_textbased",
            "-c",
            "mini_textbased.yaml",
            "-c",
            MINI_CONFIG_PATH,
            "--yolo",
            "--exit-immediately",
            "-o",
            self.log_path,
        ]
        return (
            f"mkdir -p {self.state_dir} && cd {shlex.quote(workdir)} && "
            f"{shlex.join(argv)} -t {INSTRUCTION_ARGUMENT} </dev/null"
        )

    def log_paths(self) -> tuple[str, ...]:
        """Its trajectory (messages and actions)."""
        return (self.log_path,)


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)
