"""The trainer: episodes to batches to backend updates to new policy versions; one
``TrainerCore`` under the consumer, the whole loop and SFT."""

from __future__ import annotations

from rllm.consumers.trainer.batching import Batcher, DropCounts
from rllm.consumers.trainer.core import TrainerCore
from rllm.consumers.trainer.errors import (
    CapabilityError,
    CheckpointError,
    MissingTokensError,
    TrainerError,
)
from rllm.consumers.trainer.settings import BackendName, SyncMode, TrainerSettings
from rllm.consumers.trainer.sft_loop import SftReport, train_sft
from rllm.consumers.trainer.teacher import TeacherClient, TeacherError
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
    "SftReport",
    "SyncMode",
    "TeacherClient",
    "TeacherError",
    "TrainBatch",
    "TrainSequence",
    "TrainerCore",
    "TrainerError",
    "TrainerSettings",
    "TrainingBackend",
    "UpdateResult",
    "train_sft",
]
