"""Contracts of the Python API: what an agent function receives and what a run produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rllm.schemas.types import SessionEvent, SessionStatus, Task

__all__ = ["AgentAnswer", "Attempt", "RolloutConfig", "RolloutOutcome", "SessionTotals"]


@dataclass(frozen=True)
class RolloutConfig:
    """Handed to an ``@rllm.rollout`` function: where to send its LLM calls."""

    base_url: str
    """OpenAI-compatible base URL of this run's gateway session (ends in ``/v1``)."""
    api_key: str
    """The session's key; pass it as the client's API key."""
    model: str
    """Model name to request."""
    session_id: str
    """This run's session id."""
    run_id: str
    """The eval or train run."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters to pass on (temperature, top_p, max_tokens, ...)."""
    rollout_index: int = 0
    """Index of this run within its group."""

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for the ``anthropic`` client (it appends ``/v1`` itself)."""
        return self.base_url.removesuffix("/v1")

    def openai_client(self) -> Any:
        """A synchronous ``openai.OpenAI`` client bound to this session."""
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0)

    def async_openai_client(self) -> Any:
        """An ``openai.AsyncOpenAI`` client bound to this session."""
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0)


@dataclass(frozen=True)
class AgentAnswer:
    """What an agent may return: its final text, plus the token usage it saw."""

    text: str
    """The final answer (scored by the evaluator)."""
    prompt_tokens: int = 0
    """Prompt tokens over all its calls."""
    completion_tokens: int = 0
    """Completion tokens over all its calls."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth keeping in the session's output."""


@dataclass(frozen=True)
class Attempt:
    """What one run of an agent in an open session gave, before the session closes."""

    status: SessionStatus
    """How the session closes."""
    output: Any = None
    """The session's output, JSON-ready."""
    error: str | None = None
    """Why it failed (``SessionClosed.error``)."""
    answer: str | None = None
    """The answer text, when there is one."""
    prompt_tokens: int = 0
    """Prompt tokens the agent reported (0: the gateway's totals are taken)."""
    completion_tokens: int = 0
    """Completion tokens the agent reported, likewise."""
    reward: SessionEvent | None = None
    """The attempt's own ``RewardAssigned`` (a verifier's), published with the close when
    the caller's ``before_close`` gave none."""


@dataclass(frozen=True)
class RolloutOutcome:
    """The result of one agent run on one task."""

    session_id: str
    """Its session (trajectory) id."""
    run_id: str
    """Its run."""
    task: Task
    """The task."""
    rollout_index: int
    """Index within the group."""
    status: SessionStatus
    """ok, or error when the function raised."""
    answer: str | None
    """The final answer text, when the function returned one."""
    output: Any
    """What the function returned, JSON-ready."""
    error: str | None
    """Why it failed."""
    num_steps: int
    """LLM calls the gateway captured."""
    seconds: float
    """Wall time of the run."""
    prompt_tokens: int = 0
    """Prompt tokens over its calls: what the agent reported, else (an agent that reported
    none) the sum of the upstream's usage the gateway captured."""
    completion_tokens: int = 0
    """Completion tokens over its calls, likewise."""


@dataclass(frozen=True)
class SessionTotals:
    """What the gateway counted for a session it closed."""

    num_steps: int = 0
    """Steps it captured (failed ones included)."""
    prompt_tokens: int = 0
    """Prompt tokens of those steps, as the upstream reported them."""
    completion_tokens: int = 0
    """Completion tokens of those steps, as the upstream reported them."""
