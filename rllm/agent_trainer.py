"""The old home of ``AgentTrainer``: it lives in ``rllm.app`` now; this module keeps
``from rllm.agent_trainer import AgentTrainer`` (and the names beside it) working."""

from __future__ import annotations

from rllm.app import (
    DEFAULT_MAX_TOKENS,
    AgentTrainer,
    TrainConfig,
    TrainReport,
    UpdateRecord,
    describe_drops,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "AgentTrainer",
    "TrainConfig",
    "TrainReport",
    "UpdateRecord",
    "describe_drops",
]
