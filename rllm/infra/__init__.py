"""The local stack: a real Kafka broker started from ``infra/kafka`` and its topics."""

from __future__ import annotations

from rllm.infra.broker import LocalBroker, LocalCluster, kafka_dir
from rllm.infra.stack import ComponentStatus, stack_down, stack_status, stack_up

__all__ = [
    "ComponentStatus",
    "LocalBroker",
    "LocalCluster",
    "kafka_dir",
    "stack_down",
    "stack_status",
    "stack_up",
]
