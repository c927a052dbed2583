"""The one Kafka layer: components write no Kafka plumbing of their own, and only this
package imports ``confluent_kafka``.

Modules:

- ``clients``: producer, consumer and admin clients with our defaults; the codec (with
  the schema registry when one is set); the broker probe.
- ``admin``: create the design's topics, delete topics, list what the broker holds, end
  offsets, a consumer group's lag, and the groups with members now.
- ``publish``: ``EventPublisher`` (per-record futures, or ``Acks`` counted per batch).
- ``consume``: ``TopicReader`` (decode each record or dead-letter it with the reason,
  offsets committed on demand) and the dead-letter helpers.
- ``policy``: ``PolicyFollower``, the reader of ``rllm.policy-updates`` that every gateway
  and model server runs.
- ``errors``: confluent-kafka's errors mapped to ``rllm.errors.KafkaError`` and below.
"""

from __future__ import annotations

from rllm.kafka.admin import (
    active_groups,
    created_partitions,
    delete_topics,
    end_offsets,
    ensure_topics,
    group_lag,
    list_topics,
)
from rllm.kafka.clients import (
    ConfluentRegistry,
    check_broker,
    consumer_config,
    make_admin,
    make_codec,
    make_consumer,
    make_producer,
    producer_config,
)
from rllm.kafka.consume import (
    ConsumedRecord,
    Position,
    Start,
    TopicReader,
    dead_letter_for,
    dead_letters_to,
)
from rllm.kafka.errors import kafka_errors, translate
from rllm.kafka.policy import PolicyFollower, read_policy_log
from rllm.kafka.publish import Acks, EventPublisher

__all__ = [
    "Acks",
    "ConfluentRegistry",
    "ConsumedRecord",
    "EventPublisher",
    "PolicyFollower",
    "Position",
    "Start",
    "TopicReader",
    "active_groups",
    "check_broker",
    "consumer_config",
    "created_partitions",
    "dead_letter_for",
    "dead_letters_to",
    "delete_topics",
    "end_offsets",
    "ensure_topics",
    "group_lag",
    "kafka_errors",
    "list_topics",
    "make_admin",
    "make_codec",
    "make_consumer",
    "make_producer",
    "producer_config",
    "read_policy_log",
    "translate",
]
