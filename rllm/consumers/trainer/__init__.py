"""The trainer consumer: episodes to batches to backend updates to new policy versions."""

from __future__ import annotations

from rllm.consumers.trainer.batching import Batcher, DropCounts
from rllm.consumers.trainer.errors import (
    CapabilityError,
    CheckpointError,
    MissingTokensError,
    TrainerError,
)
from rllm.consumers.trainer.settings import BackendName, SyncMode, TrainerSettings
from rllm.consumers.trainer.types import (
    Capabilities,
    LossAgg,
    LossKind,
    TrainBatch,
    TrainingBackend,
    TrainSequence,
    UpdateResult,
)

__all__ = [
    "BackendName",
    "Batcher",
    "Capabilities",
    "CapabilityError",
    "CheckpointError",
    "DropCounts",
    "LossAgg",
    "LossKind",
    "MissingTokensError",
    "SyncMode",
    "TrainBatch",
    "TrainSequence",
    "TrainerError",
    "TrainerSettings",
    "TrainingBackend",
    "UpdateResult",
]
