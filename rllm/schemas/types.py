"""Frozen pydantic mirrors of the Avro records in ``rllm/schemas/avro/``.

Field names, order and defaults follow the ``.avsc`` files one to one; a unit test checks
that they agree. JSON-valued fields end in ``_json`` and have a parsed property beside them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from rllm.schemas.enums import ApiKind, Estimator, SessionStatus, TokenStatus
from rllm.schemas.tokens import unpack_logprobs, unpack_tokens

__all__ = [
    "ApiKind",
    "AvroRecord",
    "DeadLetter",
    "EpisodeAssembled",
    "Estimator",
    "RewardAssigned",
    "SessionClosed",
    "SessionEvent",
    "SessionOpened",
    "SessionPayload",
    "SessionStatus",
    "StepCaptured",
    "StepError",
    "Task",
    "TokenStatus",
    "TrajectoryAssembled",
    "Usage",
    "utcnow",
]


def utcnow() -> datetime:
    """Now, timezone-aware UTC, truncated to microseconds as Avro stores it."""
    return datetime.now(UTC)


class AvroRecord(BaseModel):
    """Base of every mirrored Avro record: a frozen pydantic model whose ``avro_name`` is
    its record's full name in ``rllm/schemas/avro`` (the codec and topics key on it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)
    avro_name: ClassVar[str] = ""


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class Task(AvroRecord):
    """One task an agent is run on."""

    avro_name: ClassVar[str] = "rllm.events.Task"
    task_id: str
    """Stable id of the task within its dataset."""
    instruction: str = ""
    """The prompt or instruction given to the agent."""
    ground_truth_json: str | None = None
    """Ground truth as JSON, if any."""
    reward_fn: str | None = None
    """Registered reward function that scores this task."""
    benchmark: str | None = None
    """Benchmark or dataset name."""
    metadata_json: str = "{}"
    """Free-form metadata as a JSON object."""

    @property
    def ground_truth(self) -> Any:
        """The ground truth, parsed from JSON (None when absent)."""
        return _loads(self.ground_truth_json)

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata object, parsed."""
        return dict(json.loads(self.metadata_json))


class Usage(AvroRecord):
    """Token usage of one call."""

    avro_name: ClassVar[str] = "rllm.events.Usage"
    prompt_tokens: int = 0
    """Tokens in the full prompt."""
    completion_tokens: int = 0
    """Tokens in the response."""
    cached_tokens: int = 0
    """Prompt tokens served from the upstream's prefix cache."""


class StepError(AvroRecord):
    """Why an LLM call failed: a record inside ``StepCaptured``, not an exception."""

    avro_name: ClassVar[str] = "rllm.events.StepError"
    kind: str
    """upstream_status, upstream_timeout, upstream_unreachable, invalid_response, gateway,
    too_large (the captured step was over the event limit: its payloads were dropped),
    client_disconnected (the agent went away before its answer; the upstream request was
    cancelled) or missing_choice (a choice of an ``n > 1`` call that did not come back)."""
    message: str
    """Human-readable reason, without secrets."""
    status_code: int | None = None
    """HTTP status the agent received."""


class SessionOpened(AvroRecord):
    """A session (one agent run on one task) started."""

    avro_name: ClassVar[str] = "rllm.events.SessionOpened"
    task: Task
    """The task this run works on."""
    rollout_index: int = 0
    """Index of this run within its group."""
    group_size: int = 1
    """How many runs of this task the episode waits for."""
    trajectory_name: str = "default"
    """Name of the trajectory within a multi-agent run."""
    agent: str = ""
    """Harness or agent name."""
    policy_version: int = 0
    """Policy version when the session opened."""
    model: str | None = None
    """Model the session was opened for."""
    metadata_json: str = "{}"
    """Run-level metadata as a JSON object."""


class StepCaptured(AvroRecord):
    """One LLM call; token arrays are packed little-endian int32 / float32 bytes."""

    avro_name: ClassVar[str] = "rllm.events.StepCaptured"
    step_id: str
    """Unique id of this step."""
    step_index: int
    """0-based order within the session; a call asking for ``n`` choices is captured as
    ``n`` steps at consecutive indices, one per choice (choice k >= 1 keyed to the first
    choice by ``parent_step_id``, with the same prompt; see the .avsc doc)."""
    parent_step_id: str | None = None
    """Step whose prompt+response this prompt extends, when delta-encoded."""
    api: ApiKind
    """API the agent called."""
    model: str
    """Model name as requested."""
    request_json: str = "{}"
    """The agent's request body as JSON: whole, or the middle part when delta-encoded
    (``request_prefix_len`` / ``request_suffix_len``)."""
    response_json: str = "{}"
    """The response returned to the agent as JSON."""
    prompt_token_ids: bytes = b""
    """Packed int32 prompt IDs: full, or the suffix after ``prompt_prefix_len``."""
    prompt_prefix_len: int = 0
    """Tokens reused from the parent's prompt+response (0: full prompt)."""
    response_token_ids: bytes = b""
    """Packed int32 IDs the model sampled."""
    response_logprobs: bytes = b""
    """Packed float32 logprob per sampled token."""
    finish_reason: str | None = None
    """Why generation stopped."""
    sampling_params_json: str = "{}"
    """Sampling parameters sent upstream, as JSON."""
    policy_version: int = 0
    """Policy version at dispatch."""
    upstream: str = ""
    """Upstream that served the call (no credentials)."""
    started_at: datetime = Field(default_factory=utcnow)
    """When the gateway received the call."""
    latency_ms: float = 0.0
    """Upstream latency in milliseconds."""
    ttft_ms: float | None = None
    """Time to first token for streamed calls."""
    overhead_ms: float = 0.0
    """Latency the gateway added."""
    usage: Usage = Field(default_factory=Usage)
    """Token usage as reported by the upstream."""
    token_status: TokenStatus = TokenStatus.OK
    """Whether token IDs and logprobs were captured."""
    error: StepError | None = None
    """Set when the call failed."""
    request_prefix_len: int = 0
    """Code points reused from the start of the previous step's full request
    (trajectories and episodes only; see ``rllm.schemas.delta``)."""
    request_suffix_len: int = 0
    """Code points reused from the end of the previous step's full request."""

    @property
    def prompt_ids(self) -> npt.NDArray[np.int32]:
        """Prompt token IDs as stored (the suffix when delta-encoded)."""
        return unpack_tokens(self.prompt_token_ids)

    @property
    def response_ids(self) -> npt.NDArray[np.int32]:
        """Sampled token IDs."""
        return unpack_tokens(self.response_token_ids)

    @property
    def logprobs(self) -> npt.NDArray[np.float32]:
        """Logprob of each sampled token."""
        return unpack_logprobs(self.response_logprobs)


class SessionClosed(AvroRecord):
    """A session ended."""

    avro_name: ClassVar[str] = "rllm.events.SessionClosed"
    status: SessionStatus
    """How the run ended."""
    output_json: str | None = None
    """The agent's final output as JSON."""
    error: str | None = None
    """Why the run failed."""
    num_steps: int
    """Steps the gateway captured for the session."""


class RewardAssigned(AvroRecord):
    """A reward for a session."""

    avro_name: ClassVar[str] = "rllm.events.RewardAssigned"
    reward: float
    """Scalar reward."""
    is_correct: bool | None = None
    """Whether the answer counts as correct."""
    signals: dict[str, float] = Field(default_factory=dict)
    """Named reward components."""
    evaluator: str = ""
    """Evaluator or reward function name."""
    metadata_json: str = "{}"
    """Evaluator details as a JSON object."""


SessionPayload = SessionOpened | StepCaptured | SessionClosed | RewardAssigned


class SessionEvent(AvroRecord):
    """Envelope on ``rllm.session-events``, keyed by ``session_id``."""

    avro_name: ClassVar[str] = "rllm.events.SessionEvent"
    event_id: str
    """Unique id; consumers drop duplicates by it."""
    session_id: str
    """Session the event belongs to; the Kafka key."""
    run_id: str
    """Run the session belongs to."""
    emitted_at: datetime = Field(default_factory=utcnow)
    """When the producer emitted it."""
    producer: str = ""
    """Who emitted it."""
    payload: SessionPayload
    """The lifecycle or step record."""


class TrajectoryAssembled(AvroRecord):
    """One agent run assembled from its session's events."""

    avro_name: ClassVar[str] = "rllm.events.TrajectoryAssembled"
    event_id: str
    """Deterministic id derived from session_id."""
    session_id: str
    """The session this trajectory is."""
    run_id: str
    """Run."""
    task: Task
    """The task."""
    rollout_index: int = 0
    """Index within the group."""
    group_size: int = 1
    """Declared group size."""
    trajectory_name: str = "default"
    """Name within a multi-agent run."""
    agent: str = ""
    """Harness or agent name."""
    steps: tuple[StepCaptured, ...]
    """Steps in order, delta-encoded (prompts and requests carried once); full ones from
    ``rllm.schemas.delta.restore_steps``."""
    status: SessionStatus
    """How the run ended."""
    output_json: str | None = None
    """Final output as JSON."""
    error: str | None = None
    """Why the run failed."""
    num_steps_reported: int = 0
    """Step count the gateway reported at close."""
    reward: float | None = None
    """Reward, once scored."""
    is_correct: bool | None = None
    """Correctness, once scored."""
    reward_signals: dict[str, float] = Field(default_factory=dict)
    """Named reward components."""
    reward_error: str | None = None
    """Why scoring failed."""
    evaluator: str = ""
    """Who scored it."""
    opened_at: datetime = Field(default_factory=utcnow)
    """When the session opened."""
    closed_at: datetime = Field(default_factory=utcnow)
    """When the session closed."""
    flags: tuple[str, ...] = ()
    """Anomalies (step_count_mismatch, missing_tokens, late_steps, ...)."""


class EpisodeAssembled(AvroRecord):
    """One task in one run: the group of trajectories with advantages."""

    avro_name: ClassVar[str] = "rllm.events.EpisodeAssembled"
    event_id: str
    """Deterministic id run_id/task_id."""
    run_id: str
    """Run."""
    task: Task
    """The task."""
    trajectories: tuple[TrajectoryAssembled, ...]
    """The group in rollout_index order."""
    rewards: tuple[float, ...]
    """rewards_G."""
    advantages: tuple[float, ...]
    """advantages_G."""
    estimator: str = Estimator.GRPO
    """Advantage estimator used (an ``Estimator`` name; a string, as the Avro field)."""
    group_size: int
    """Declared group size."""
    is_partial: bool = False
    """A timeout closed the group early."""
    uniform_reward: bool = False
    """All rewards equal."""
    assembled_at: datetime = Field(default_factory=utcnow)
    """When the group was completed."""


class DeadLetter(AvroRecord):
    """An event a consumer refused, with the reason."""

    avro_name: ClassVar[str] = "rllm.events.DeadLetter"
    source_topic: str
    """Topic it came from."""
    source_partition: int
    """Its partition."""
    source_offset: int
    """Its offset."""
    key: bytes | None = None
    """Its key, as it was."""
    value: bytes
    """Its value, as it was."""
    reason: str
    """Why it was refused."""
    error_type: str = ""
    """Class name of the error."""
    consumer: str = ""
    """Component that refused it."""
    failed_at: datetime = Field(default_factory=utcnow)
    """When it was refused."""
