"""The string enums of the event records: which API was called, which advantage estimator,
whether tokens were captured, how a session ended (``rllm.schemas.types`` re-exports them)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ApiKind", "Estimator", "SessionStatus", "TokenStatus"]


class ApiKind(StrEnum):
    """Which API an agent called."""

    CHAT = "chat"
    COMPLETIONS = "completions"
    RESPONSES = "responses"
    ANTHROPIC_MESSAGES = "anthropic_messages"
    GENERATE = "generate"


class Estimator(StrEnum):
    """Advantage estimators: the processors compute one, the trainer checks which, the
    backends declare the ones they train on. verl's ``algorithm.adv_estimator`` names,
    except ``reinforce`` (the raw reward, which verl does not offer)."""

    GRPO = "grpo"
    """Group-normalised: ``(r - mean(r)) / (std(r) + eps)``."""
    RLOO = "rloo"
    """Leave-one-out: each reward minus the mean of the others."""
    REINFORCE = "reinforce"
    """The raw reward minus a constant baseline."""
    REINFORCE_PLUS_PLUS = "reinforce_plus_plus"
    """REINFORCE++: the reward, whitened over each training batch."""
    REINFORCE_PLUS_PLUS_BASELINE = "reinforce_plus_plus_baseline"
    """REINFORCE++-baseline: the reward minus the group mean, whitened over each batch."""


class TokenStatus(StrEnum):
    """Whether a step carries the token IDs the model sampled."""

    OK = "ok"
    MISSING = "missing"


class SessionStatus(StrEnum):
    """How a session ended."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
