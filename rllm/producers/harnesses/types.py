"""Contracts of the harness layer: what a harness (a command-line agent run inside a task's
sandbox) tells the runner, and what one harness run produced.

A harness is one module per implementation (``oracle``, ``bash``, ...), registered by name
in ``rllm.producers.harnesses.registry``; one runner (``rllm.producers.harnesses.runner``)
does the sandbox and session lifecycle for every harness and every task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rllm.benchmarks.harbor.task import HarborTask
from rllm.benchmarks.harbor.verifier import VerifierResult
from rllm.sandboxes.types import Mount

__all__ = [
    "AGENT_LOG_DIR",
    "INSTRUCTION_PATH",
    "AgentSetup",
    "CallsModel",
    "CloseReason",
    "Harness",
    "HarnessApi",
    "HarnessBase",
    "HarnessRun",
    "InstallsOnHost",
    "ModelEndpoint",
    "UploadsTaskFiles",
]

INSTRUCTION_PATH = "/rllm/instruction.md"
"""Where the runner writes the task's instruction inside the sandbox."""

AGENT_LOG_DIR = "/logs/agent"
"""Where harnesses write their own logs (kept as artifacts, never as training data)."""


class HarnessApi(StrEnum):
    """The model API a harness speaks to the gateway."""

    NONE = "none"
    """Makes no model call (the oracle)."""
    OPENAI_CHAT = "openai-chat"
    """OpenAI chat completions (``/v1/chat/completions``)."""
    RESPONSES = "responses"
    """OpenAI Responses (``/v1/responses``)."""
    ANTHROPIC = "anthropic"
    """Anthropic Messages (``/v1/messages``)."""


class CloseReason(StrEnum):
    """Why a harness run's session closed as it did (``SessionClosed.error`` starts with it,
    and the session's output carries it as ``reason``)."""

    OK = "ok"
    """The agent exited 0 and the verifier gave a reward."""
    TIMEOUT = "timeout"
    """The agent ran past the task's ``[agent] timeout_sec`` and was killed."""
    AGENT_ERROR = "agent_error"
    """The agent exited non-zero, or could not be started."""
    VERIFIER_ERROR = "verifier_error"
    """The verifier gave no usable reward (timed out, no or a bad reward file)."""
    SANDBOX_ERROR = "sandbox_error"
    """The task's image, the harness's install or the sandbox failed before the agent ran."""


@dataclass(frozen=True)
class ModelEndpoint:
    """Where one run's model calls go: its gateway session."""

    base_url: str
    """The session's URL, ending in ``/v1`` (the only address the sandbox can reach)."""
    api_key: str
    """The session's key."""
    model: str
    """The model name the session serves."""


@dataclass(frozen=True)
class AgentSetup:
    """What a run sets before the agent's command: the variables of its environment and
    the config files written first, by absolute sandbox path."""

    env: dict[str, str] = field(default_factory=dict)
    """The command's environment."""
    files: dict[str, str] = field(default_factory=dict)
    """Config files, sandbox path -> text (written mode 0600, owned by the agent user)."""


@runtime_checkable
class Harness(Protocol):
    """A command-line agent the runner runs in a task's sandbox: what every harness has.

    Everything it returns is data; the runner does all I/O. Its model calls go to the
    gateway session's URL (the only address its sandbox can reach); steps come from the
    gateway, never from its logs. What only some harnesses do is optional: a model to
    call (``CallsModel``), a host install (``InstallsOnHost``), task files to copy in
    (``UploadsTaskFiles``); ``HarnessBase`` gives the no-op install script, mounts and
    logs.
    """

    name: str
    """Registry name (``bash``, ``oracle``, ``claude-code``, ...)."""
    version: str
    """The pinned version it installs."""
    api: HarnessApi
    """The model API it speaks."""

    def install_script(self) -> str:
        """A shell script, idempotent, run once when the snapshot is built (with the host's
        network); empty when there is nothing to install. Its text is part of the
        snapshot's key, so changing it builds a new snapshot."""
        ...

    def mounts(self) -> tuple[Mount, ...]:
        """Host paths bound read-only into the run's sandbox (a host interpreter)."""
        ...

    def command(self, workdir: str) -> str:
        """The shell command that runs the agent on the instruction at
        ``INSTRUCTION_PATH`` from ``workdir``."""
        ...

    def log_paths(self) -> tuple[str, ...]:
        """Its own log or trajectory files inside the sandbox, kept as artifacts."""
        ...


@runtime_checkable
class CallsModel(Protocol):
    """A harness that calls the model (every one but the oracle)."""

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The environment and config files that point it at ``endpoint``, in the
        variables and files the CLI reads."""
        ...


@runtime_checkable
class InstallsOnHost(Protocol):
    """A harness installed on the host (npm, PyPI) and bound into the sandbox."""

    def is_installed(self, home: Path) -> bool:
        """Whether its install under ``home`` (``$RLLM_HOME/harnesses``) is complete."""
        ...

    async def install(self, home: Path) -> None:
        """Install it under ``home`` (idempotent: a finished install is kept, a half-done
        one is redone).

        Raises:
            HarnessError: the install failed (the command, its exit status and output).
        """
        ...


@runtime_checkable
class UploadsTaskFiles(Protocol):
    """A harness that needs files of the task in its sandbox (the oracle's solution)."""

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Host directories of ``task`` to copy in before the run, by sandbox path."""
        ...


class HarnessBase:
    """The defaults of a harness's declarations: nothing in the snapshot, nothing bound
    in from the host, no log files of its own."""

    def install_script(self) -> str:
        """Nothing to install in the snapshot."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """Nothing from the host."""
        return ()

    def log_paths(self) -> tuple[str, ...]:
        """None: its output is the command's."""
        return ()


@dataclass(frozen=True)
class HarnessRun:
    """What one harness run on one task did, from sandbox to verifier."""

    harness: str
    """The harness's name."""
    task: str
    """The Harbor task's name."""
    reason: CloseReason
    """How it ended."""
    error: str | None = None
    """What went wrong, naming the task, the harness and the value; None when ok."""
    agent_exit_code: int | None = None
    """The agent command's exit status; None when it was killed or never ran."""
    agent_s: float = 0.0
    """Seconds the agent command ran."""
    agent_output_tail: str = ""
    """The end of the agent command's stdout and stderr."""
    verifier: VerifierResult | None = None
    """The verification, when it ran."""
    sandbox_s: float = 0.0
    """Seconds spent on the sandbox itself: snapshot lookup, create, uploads and close."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """The harness's log files kept, sandbox path -> host path."""

    @property
    def reward(self) -> float | None:
        """The verifier's reward; None when it did not give one."""
        return self.verifier.reward if self.verifier is not None and self.verifier.ok else None

    def summary(self) -> dict[str, Any]:
        """JSON-ready form (the session's output)."""
        verifier = self.verifier
        return {
            "harness": self.harness,
            "task": self.task,
            "reason": self.reason.value,
            "error": self.error,
            "agent_exit_code": self.agent_exit_code,
            "agent_s": round(self.agent_s, 3),
            "agent_output_tail": self.agent_output_tail,
            "reward": self.reward,
            "values": dict(verifier.values) if verifier is not None else {},
            "verifier_error": verifier.error if verifier is not None else None,
            "verifier_exit_code": verifier.exit_code if verifier is not None else None,
            "verifier_output_tail": verifier.stdout_tail if verifier is not None else "",
            "sandbox_s": round(self.sandbox_s, 3),
            "artifacts": dict(self.artifacts),
        }
