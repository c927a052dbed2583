"""Kafka clients with our defaults: producers (durable), consumers (manual commits,
read_committed), admin clients, the codec (with the schema registry when one is set), and
the broker probe. librdkafka's own log lines go to the ``rllm.kafka.*`` loggers.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from rllm.kafka.errors import kafka_errors, translate
from rllm.schemas.codec import AvroCodec
from rllm.settings import KafkaSettings

__all__ = [
    "ConfluentRegistry",
    "check_broker",
    "consumer_config",
    "make_admin",
    "make_codec",
    "make_consumer",
    "make_producer",
    "producer_config",
]


class ConfluentRegistry:
    """Confluent's ``SchemaRegistryClient`` as the codec's ``SchemaRegistry`` port.

    Args:
        client: a ``confluent_kafka.schema_registry.SchemaRegistryClient`` (its
            ``mock://`` double in tests).
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def register(self, subject: str, schema_json: str) -> int:
        """Register an Avro schema under ``subject``; return its id."""
        from confluent_kafka.schema_registry import Schema

        schema_id: int = self.client.register_schema(subject, Schema(schema_json, "AVRO"))
        return schema_id

    def schema_json(self, schema_id: int) -> str:
        """The schema registered with ``schema_id``, as JSON text."""
        text: str = self.client.get_schema(schema_id).schema_str
        return text


def make_codec(settings: KafkaSettings) -> AvroCodec:
    """The codec for these settings: Confluent framing when a registry URL is set."""
    if settings.schema_registry_url:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        client = SchemaRegistryClient.new_client({"url": settings.schema_registry_url})
        return AvroCodec(ConfluentRegistry(client))
    return AvroCodec()


_CLIENT_LOG = logging.getLogger("rllm.kafka.librdkafka")
"""librdkafka's own log lines (``%3|...|FAIL|`` connection refusals, retried by the client
itself) from every client made here: with no handler of their own they would be printed
to stderr by the hundred while a broker is down. They reach an application's logging
configuration through propagation (``logging.getLogger("rllm.kafka").setLevel(DEBUG)``);
the failure that matters is raised as a ``KafkaUnavailableError`` naming ``rllm-cli up``."""
_CLIENT_LOG.addHandler(logging.NullHandler())


def _client_config(settings: KafkaSettings) -> dict[str, Any]:
    """``settings.client_config()`` with librdkafka's log routed to ``_CLIENT_LOG``."""
    return {**settings.client_config(), "logger": _CLIENT_LOG}


def producer_config(settings: KafkaSettings, **overrides: Any) -> dict[str, Any]:
    """Durable producer defaults: acks=all, idempotent, zstd, large messages."""
    conf: dict[str, Any] = {
        **_client_config(settings),
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 2,
        "message.max.bytes": settings.max_message_bytes + 65536,
        "message.timeout.ms": int(settings.request_timeout_s * 1000),
    }
    conf.update(overrides)
    return conf


def make_producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    """A confluent-kafka producer with our defaults."""
    with kafka_errors("creating producer"):
        return Producer(producer_config(settings, **overrides))


def consumer_config(settings: KafkaSettings, group_id: str, **overrides: Any) -> dict[str, Any]:
    """Consumer defaults: manual commits, read_committed, start from the beginning."""
    conf: dict[str, Any] = {
        **_client_config(settings),
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "fetch.max.bytes": max(settings.max_message_bytes * 2, 52428800),
        "max.partition.fetch.bytes": settings.max_message_bytes + 65536,
    }
    conf.update(overrides)
    return conf


def make_consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> Consumer:
    """A confluent-kafka consumer with our defaults (components read through
    ``rllm.kafka.TopicReader``; tests and tools may take the client itself)."""
    with kafka_errors("creating consumer"):
        return Consumer(consumer_config(settings, group_id, **overrides))


def make_admin(settings: KafkaSettings) -> AdminClient:
    """A confluent-kafka admin client."""
    return AdminClient(_client_config(settings))


_PROBE_LOG = logging.getLogger("rllm.kafka.probe")
_PROBE_LOG.addHandler(logging.NullHandler())


def check_broker(settings: KafkaSettings, timeout_s: float = 5.0) -> int:
    """Ask the broker for metadata; return the number of brokers that answered. The
    client's own connection-refused lines go to the ``rllm.kafka.probe`` logger, not to
    stderr: a down broker is this function's answer, not noise.

    Raises:
        KafkaUnavailableError: if no broker answers within ``timeout_s``.
    """
    try:
        conf: dict[str, object] = {**settings.client_config(), "logger": _PROBE_LOG}
        # confluent-kafka's stubs omit the documented `logger` entry (a logging.Logger)
        probe = AdminClient(conf)  # type: ignore[arg-type]  # the stubs omit `logger`
        meta = probe.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"connecting to {settings.bootstrap_servers}") from exc
    return len(meta.brokers)
