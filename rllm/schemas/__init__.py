"""Event schemas: Avro records, their pydantic mirrors, the codec and the topics."""

from __future__ import annotations

from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import from_json_dict, to_json_dict
from rllm.schemas.delta import full_prompts, full_requests, restore_steps
from rllm.schemas.envelope import envelope
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.tokens import pack_logprobs, pack_tokens, unpack_logprobs, unpack_tokens
from rllm.schemas.topics import TOPICS, TopicSpec
from rllm.schemas.types import (
    ApiKind,
    DeadLetter,
    EpisodeAssembled,
    Estimator,
    RewardAssigned,
    SessionClosed,
    SessionEvent,
    SessionOpened,
    SessionStatus,
    StepCaptured,
    StepError,
    Task,
    TokenStatus,
    TrajectoryAssembled,
    Usage,
)

__all__ = [
    "TOPICS",
    "ApiKind",
    "AvroCodec",
    "DeadLetter",
    "EpisodeAssembled",
    "Estimator",
    "PolicyServed",
    "PolicyUpdated",
    "RewardAssigned",
    "SessionClosed",
    "SessionEvent",
    "SessionOpened",
    "SessionStatus",
    "StepCaptured",
    "StepError",
    "Task",
    "TokenStatus",
    "TopicSpec",
    "TrajectoryAssembled",
    "Usage",
    "envelope",
    "from_json_dict",
    "full_prompts",
    "full_requests",
    "pack_logprobs",
    "pack_tokens",
    "restore_steps",
    "to_json_dict",
    "unpack_logprobs",
    "unpack_tokens",
]
