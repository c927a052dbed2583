"""The error hierarchy of rllm-stream: every error we raise is an ``RllmError``.

Each area's errors also inherit the stdlib error they stand for, so callers may catch
either::

    RllmError
    ├── ConfigError(ValueError)            a setting or flag has a bad value
    ├── SchemaError(ValueError)            an event does not fit its Avro schema
    │   ├── EncodeError                    a record could not be encoded
    │   ├── DecodeError                    bytes could not be decoded
    │   └── UnknownSchemaError(KeyError)   a fingerprint or schema id nobody knows
    ├── KafkaError                         the broker said no
    │   ├── KafkaUnavailableError(ConnectionError)   no broker answered in time
    │   ├── MessageTooLargeError(ValueError)         an event over the topic's limit
    │   └── TopicError                               topic creation or lookup failed
    └── InfraError(RuntimeError)           the local stack could not start or stop
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DecodeError",
    "EncodeError",
    "InfraError",
    "KafkaError",
    "KafkaUnavailableError",
    "MessageTooLargeError",
    "RllmError",
    "SchemaError",
    "TopicError",
    "UnknownSchemaError",
]


class RllmError(Exception):
    """Root of every error raised by rllm-stream."""


class ConfigError(RllmError, ValueError):
    """A setting, flag or environment variable has a value we cannot use."""


class SchemaError(RllmError, ValueError):
    """An event does not fit its Avro schema."""


class EncodeError(SchemaError):
    """A record could not be encoded with its schema."""


class DecodeError(SchemaError):
    """Bytes could not be decoded into an event."""


class UnknownSchemaError(SchemaError, KeyError):
    """A schema fingerprint or registry id that no bundled or registered schema has."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class KafkaError(RllmError):
    """The Kafka broker refused or failed an operation."""


class KafkaUnavailableError(KafkaError, ConnectionError):
    """No Kafka broker answered at the configured bootstrap servers."""


class MessageTooLargeError(KafkaError, ValueError):
    """An event is larger than the topic accepts; it is refused, never truncated."""


class TopicError(KafkaError):
    """A topic could not be created, altered or found."""


class InfraError(RllmError, RuntimeError):
    """A piece of the local stack (broker, services) could not start or stop."""
