"""Every topic the design names, with its key, record type and configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.types import DeadLetter, EpisodeAssembled, SessionEvent, TrajectoryAssembled

__all__ = [
    "DEAD_LETTERS",
    "EPISODES",
    "POLICY_UPDATES",
    "SESSION_EVENTS",
    "TOPICS",
    "TRAJECTORIES",
    "TopicSpec",
    "topic_spec",
]

SESSION_EVENTS = "rllm.session-events"
TRAJECTORIES = "rllm.trajectories"
EPISODES = "rllm.episodes"
POLICY_UPDATES = "rllm.policy-updates"
DEAD_LETTERS = "rllm.dead-letters"

_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_EVENT_LOG = {
    "compression.type": "zstd",
    "cleanup.policy": "delete",
    "retention.ms": "-1",  # an event log: keep everything; history and replay need it
    "max.message.bytes": str(_MAX_MESSAGE_BYTES),
}


@dataclass(frozen=True)
class TopicSpec:
    """A topic's name, partitioning and configuration."""

    name: str
    """Topic name without prefix."""
    record: str
    """Avro record carried as value."""
    key: str
    """What the Kafka key is."""
    partitions: int = 3
    """Default partition count (``rllm-cli up --partitions`` overrides)."""
    config: dict[str, str] = field(default_factory=lambda: dict(_EVENT_LOG))
    """Topic-level configuration."""

    @property
    def max_message_bytes(self) -> int:
        """Largest record the topic accepts."""
        return int(self.config.get("max.message.bytes", _MAX_MESSAGE_BYTES))


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(SESSION_EVENTS, SessionEvent.avro_name, "session_id"),
    TopicSpec(TRAJECTORIES, TrajectoryAssembled.avro_name, "run_id/task_id"),
    TopicSpec(EPISODES, EpisodeAssembled.avro_name, "run_id/task_id"),
    # One partition: versions of a run are totally ordered. Every version is kept (not
    # compacted) so analytics and resumes can see the whole sequence. Gateways publish a
    # PolicyServed here each time they adopt a version (the trainer's "it is live").
    TopicSpec(POLICY_UPDATES, PolicyUpdated.avro_name, "run_id", partitions=1),
    TopicSpec(DEAD_LETTERS, DeadLetter.avro_name, "source topic", partitions=1),
)


def topic_spec(name: str) -> TopicSpec:
    """The spec of a topic by its unprefixed name, or a KeyError listing the known ones."""
    for spec in TOPICS:
        if spec.name == name:
            return spec
    raise KeyError(f"unknown topic {name!r}; known: {', '.join(s.name for s in TOPICS)}")
