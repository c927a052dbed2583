"""``rllm-cli up`` / ``down`` / ``status``: the local stack on the embedded defaults."""

from __future__ import annotations

from dataclasses import dataclass

from rllm.errors import KafkaUnavailableError
from rllm.infra.broker import LocalBroker
from rllm.kafka import check_broker, ensure_topics
from rllm.settings import KafkaSettings, StackSettings

__all__ = ["ComponentStatus", "stack_down", "stack_status", "stack_up"]


@dataclass(frozen=True)
class ComponentStatus:
    """One piece of the stack and whether it runs."""

    name: str
    """Component name."""
    running: bool
    """Whether it runs and answers."""
    address: str
    """Where it listens."""
    detail: str = ""
    """Data directory, topic list or the reason it is down."""


def _broker(stack: StackSettings) -> LocalBroker:
    return LocalBroker(stack.kafka_port, stack.kafka_data_dir, stack.kafka_heap)


def _kafka(stack: StackSettings) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=stack.bootstrap_servers)


def stack_up(stack: StackSettings) -> list[ComponentStatus]:
    """Start the broker and create every topic; idempotent.

    Raises:
        InfraError: if the broker does not start.
    """
    broker = _broker(stack)
    broker.start()
    created = ensure_topics(_kafka(stack), partitions=stack.partitions)
    statuses = stack_status(stack)
    if created:
        statuses.append(
            ComponentStatus(
                "topics", True, stack.bootstrap_servers, "created " + ", ".join(created)
            )
        )
    return statuses


def stack_down(stack: StackSettings, purge: bool = False) -> None:
    """Stop everything ``up`` started; ``purge`` deletes the broker's data too."""
    _broker(stack).stop(purge=purge)


def stack_status(stack: StackSettings) -> list[ComponentStatus]:
    """What runs, where it listens."""
    kafka = _kafka(stack)
    try:
        brokers = check_broker(kafka, timeout_s=3)
        from rllm.kafka import make_admin

        topics = sorted(
            t for t in make_admin(kafka).list_topics(timeout=5).topics if t.startswith("rllm.")
        )
        kafka_status = ComponentStatus(
            "kafka",
            True,
            stack.bootstrap_servers,
            f"{brokers} broker, data {stack.kafka_data_dir}; topics: {', '.join(topics) or 'none'}",
        )
    except KafkaUnavailableError:
        kafka_status = ComponentStatus("kafka", False, stack.bootstrap_servers, "not running")
    return [kafka_status]
