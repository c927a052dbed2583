"""The app layer: what joins a whole loop. ``AgentTrainer`` drives rollouts through the
gateway, runs the trainer consumer in-process and waits for each update to be served;
``rllm.app.demo`` is ``make demo``'s before / train / after. ``rllm-cli train`` and
``rllm-cli demo`` build a config and call them."""

from __future__ import annotations

from rllm.app.config import DEFAULT_MAX_TOKENS, TrainConfig
from rllm.app.report import TrainReport, UpdateRecord, describe_drops
from rllm.app.trainer import AgentTrainer

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "AgentTrainer",
    "TrainConfig",
    "TrainReport",
    "UpdateRecord",
    "describe_drops",
]
