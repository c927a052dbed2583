"""The Python API: ``@rollout`` agents and ``@evaluator`` scorers in gateway sessions."""

from __future__ import annotations

from rllm.producers.sdk.agents import builtin_agent
from rllm.producers.sdk.client import GatewayClient, GatewayRequestError, SessionHandle
from rllm.producers.sdk.errors import EvaluatorResultError
from rllm.producers.sdk.evaluator import (
    Evaluator,
    evaluator,
    reward_fn_evaluator,
    to_reward_result,
)
from rllm.producers.sdk.rollout import Rollout, rollout
from rllm.producers.sdk.types import AgentAnswer, RolloutConfig, RolloutOutcome

__all__ = [
    "AgentAnswer",
    "Evaluator",
    "EvaluatorResultError",
    "GatewayClient",
    "GatewayRequestError",
    "Rollout",
    "RolloutConfig",
    "RolloutOutcome",
    "SessionHandle",
    "builtin_agent",
    "evaluator",
    "reward_fn_evaluator",
    "rollout",
    "to_reward_result",
]
