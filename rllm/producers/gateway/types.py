"""The gateway's capture contracts: what an API adapter parses from an upstream answer
(``Parsed``), what one call's step captures (``Capture``), and the sampled fields the two
share (``Sampled``, with the other choices of an ``n > 1`` call as ``Sample``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from rllm.schemas.types import ApiKind, StepError, Usage

__all__ = ["MAX_CHOICES", "Capture", "Parsed", "Sample", "Sampled"]


MAX_CHOICES = 128
"""Most choices (``n``) of one call that are captured, each as its own step."""


@dataclass(frozen=True)
class Sample:
    """One more choice of a call with ``n > 1``: what its own step captures."""

    choice: dict[str, Any]
    """The choice as the client got it (its ``index`` says which)."""
    response_ids: list[int] | None
    """Its sampled token IDs."""
    logprobs: list[float] | None
    """Their logprobs."""
    finish_reason: str | None
    """Why it stopped."""


@dataclass(kw_only=True)
class Sampled:
    """What a call's first choice sampled: the fields an adapter's ``Parsed`` answer and the
    step's ``Capture`` share (the one hands them to the other, ``take_sampled``)."""

    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    more: list[Sample] = field(default_factory=list)
    """Choices 1..n-1 of a call with ``n > 1``, in order (each becomes its own step)."""

    def take_sampled(self, other: Sampled) -> None:
        """Set this one's sampled fields to ``other``'s (the token lists shared, as the
        answer is not changed after; ``more`` copied, as the capture splits it off)."""
        for f in fields(Sampled):
            setattr(self, f.name, getattr(other, f.name))
        self.more = list(other.more)


@dataclass
class Parsed(Sampled):
    """An upstream answer: what the client gets and what the step captures (the first
    choice; the others, of a call with ``n > 1``, in ``more``)."""

    client: Any
    """The response body for the client (capture-only fields stripped)."""
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Capture(Sampled):
    """What the gateway learned from one call: its request and timing here, what the model
    sampled in the fields it shares with the adapter's ``Parsed`` answer."""

    api: ApiKind
    model: str
    request: dict[str, Any] | None
    started_at: datetime
    upstream: str
    policy_version: int
    sampling: dict[str, Any] = field(default_factory=dict)
    response: Any = None
    error: StepError | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    overhead_ms: float = 0.0
