"""The ``aider`` harness (PyPI ``aider-chat``): OpenAI chat through litellm
(``openai/<model>`` at the session's URL), one ``--message-file`` run with every
confirmation answered yes, edits applied in aider's own text edit formats (``whole``,
``diff``: file listings in the reply, no tool calls).

Installed on the host into a venv under ``<home>/aider/<version>`` made by the host's
base interpreter, bound read-only into the sandbox with that interpreter
(``rllm.producers.harnesses.pypi``) and run as ``python -S -m aider.main``. Its config
file names the session's model and URL and a model-metadata file (so it fetches no price
list); version checks, analytics, release notes, URL scraping and commits are off, and
its chat and LLM histories go to ``/logs/agent``, not into the task's workdir. It runs with
git only when the workdir is already a git repository and the image has git (its repo map
then lists the tracked files; nothing is committed, and the map's tag cache is removed
after the run), else ``--no-git``.
"""

from __future__ import annotations

import json
import shlex

from rllm.producers.harnesses.pypi import VenvInstalled
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    AgentSetup,
    HarnessApi,
    ModelEndpoint,
)

__all__ = ["AIDER_CONFIG_PATH", "AIDER_METADATA_PATH", "AiderHarness"]

VERSION = "0.86.2"
"""The pinned PyPI version."""

AIDER_CONFIG_PATH = "/rllm/aider.conf.yml"
"""The run's config (``--config``): the session's model and URL and every switch."""

AIDER_METADATA_PATH = "/rllm/aider.model.metadata.json"
"""The session's model's context window and (zero) prices, so aider asks no one."""

CONTEXT_TOKENS = 131072
"""The context window aider is told the model has (its warnings and history summaries
use it; no request carries it)."""

OUTPUT_TOKENS = 8192
"""The most output tokens aider is told the model gives (not sent either)."""

TAGS_CACHE_GLOB = ".aider.tags.cache.v*"
"""The repo map's cache aider leaves in a git workdir's root (removed after the run)."""


class AiderHarness(VenvInstalled):
    """aider in ``--message-file`` mode: one request, the edits of its reply applied (and
    a lint reflection when an edited file fails its linter), then it exits.

    Args:
        edit_format: aider's edit format (``whole``, ``diff``, ``udiff``, ...); None lets
            aider pick by model name (``whole`` for a model it does not know).
    """

    name = "aider"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "aider-chat"
    version_command = ("python", "-m", "aider.main", "--version")

    def __init__(self, edit_format: str | None = None) -> None:
        self.edit_format = edit_format

    @property
    def chat_history_path(self) -> str:
        """Its chat transcript (markdown; an artifact)."""
        return f"{AGENT_LOG_DIR}/aider.chat.history.md"

    @property
    def llm_history_path(self) -> str:
        """Every message it sent to and got from the model (an artifact)."""
        return f"{AGENT_LOG_DIR}/aider.llm.history"

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The bound interpreter's paths, a writable home (aider keeps ``~/.aider`` there),
        the key litellm reads, and the switches that keep litellm and GitPython off the
        network and quiet; its config files (``_files``)."""
        env = {
            **self.python_environment(),
            "HOME": self.state_dir,
            "OPENAI_API_KEY": endpoint.api_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "GIT_PYTHON_REFRESH": "quiet",
            "NO_PROXY": "*",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
        return AgentSetup(env=env, files=self._files(endpoint))

    def _files(self, endpoint: ModelEndpoint) -> dict[str, str]:
        """``aider.conf.yml`` (the model ``openai/<model>`` at the session's URL, yes to
        every question, nothing that reaches out, no commits, histories in the log
        folder) and the model's metadata (the key is in the environment)."""
        litellm_model = f"openai/{endpoint.model}"
        settings: dict[str, object] = {
            "model": litellm_model,
            "openai-api-base": endpoint.base_url,
            "model-metadata-file": AIDER_METADATA_PATH,
            "yes-always": True,
            "auto-commits": False,
            "dirty-commits": False,
            "gitignore": False,
            "analytics-disable": True,
            "check-update": False,
            "show-release-notes": False,
            "show-model-warnings": False,
            "detect-urls": False,
            "notifications": False,
            "pretty": False,
            "fancy-input": False,
            "restore-chat-history": False,
            "chat-history-file": self.chat_history_path,
            "llm-history-file": self.llm_history_path,
            "input-history-file": f"{self.state_dir}/input.history",
        }
        if self.edit_format is not None:
            settings["edit-format"] = self.edit_format
        metadata = {
            litellm_model: {
                "max_input_tokens": CONTEXT_TOKENS,
                "max_output_tokens": OUTPUT_TOKENS,
                "max_tokens": OUTPUT_TOKENS,
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
        config = "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
        return {
            AIDER_CONFIG_PATH: config,
            AIDER_METADATA_PATH: json.dumps(metadata, indent=2) + "\n",
        }

    def command(self, workdir: str) -> str:
        """``aider --message-file`` from the workdir (git only in a git repository), stdin
        closed; then its repo map's tag cache is removed from the workdir, its exit status
        kept."""
        argv = [
            self.sandbox_python(),
            "-S",
            "-B",
            "-m",
            "aider.main",
            "--config",
            AIDER_CONFIG_PATH,
            "--message-file",
            INSTRUCTION_PATH,
        ]
        git = (
            "if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; "
            "then git=--git; else git=--no-git; fi"
        )
        return (
            f"mkdir -p {self.state_dir} && cd {shlex.quote(workdir)} && {git} && "
            f'{shlex.join(argv)} "$git" </dev/null; rc=$?; '
            f"rm -rf {TAGS_CACHE_GLOB}; exit $rc"
        )

    def log_paths(self) -> tuple[str, ...]:
        """Its chat transcript and its LLM history."""
        return (self.chat_history_path, self.llm_history_path)
