"""Errors of the SDK: its gateway client, and what an evaluator returns.

::

    RllmError
    ├── GatewayRequestError(ConnectionError)   the gateway refused or could not be reached
    └── EvaluatorResultError(TypeError)        an evaluator returned no reward
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["EvaluatorResultError", "GatewayRequestError"]


class GatewayRequestError(RllmError, ConnectionError):
    """The gateway refused or could not be reached."""


class EvaluatorResultError(RllmError, TypeError):
    """An evaluator returned something that is not a reward (a float, a bool, ``(reward,
    is_correct)``, a dict with ``reward`` or a RewardResult); the message names it."""
