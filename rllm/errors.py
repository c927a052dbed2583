"""The error hierarchy of rllm-stream: every error we raise is an ``RllmError``.

Each area's errors also inherit the stdlib error they stand for, so callers may catch
either. The root's own classes (config, schemas, Kafka, infra: used by every layer) are
defined here; every other area's live in its ``errors.py``, named on the right. A class
with two parents is drawn under its area's root, the other parent in parentheses.
``tests/unit/test_errors.py`` checks this tree against the classes::

    RllmError
    ├── ConfigError(ValueError)                      a setting or flag has a bad value
    │   ├── ModelConfigError                         models/errors.py
    │   └── UnknownHarnessError                      producers/harnesses/errors.py
    ├── SchemaError(ValueError)                      an event does not fit its Avro schema
    │   ├── EncodeError                              a record could not be encoded
    │   ├── DecodeError                              bytes could not be decoded
    │   ├── UnknownSchemaError(KeyError)             a fingerprint or schema id nobody knows
    │   └── UnsupportedSchemaError                   left to fastavro by the accelerator
    ├── KafkaError                                   the broker said no (rllm.kafka.errors maps)
    │   ├── KafkaUnavailableError(ConnectionError)   no broker answered in time
    │   ├── MessageTooLargeError(ValueError)         an event over the topic's limit
    │   └── TopicError                               topic creation or lookup failed
    ├── InfraError(RuntimeError)                     the local stack could not start or stop
    │   └── LocalModelError                          models/errors.py
    ├── SandboxError(RuntimeError)                   sandboxes/errors.py
    │   ├── SandboxUnavailableError
    │   ├── SandboxClosedError
    │   ├── ImageError(LookupError)
    │   │   ├── DockerfileError(ValueError)
    │   │   └── PullError
    │   │       └── RegistryUnreachableError
    │   └── SnapshotError
    ├── BenchmarkError                               benchmarks/errors.py
    │   ├── UnknownBenchmarkError(KeyError)
    │   ├── UnknownRewardFnError(KeyError)
    │   ├── NameTakenError(ValueError)
    │   ├── DatasetRowError(ValueError)
    │   ├── DatasetUnavailableError(LookupError)
    │   ├── GradingError(ValueError)
    │   ├── HarborTaskError(ValueError)
    │   ├── RewardFileError(ValueError)
    │   └── CodeSandboxError(RuntimeError)
    ├── GatewayError                                 producers/gateway/errors.py
    ├── UpstreamFailure                              producers/gateway/errors.py
    ├── UnreadableRequestError(ValueError)           producers/gateway/errors.py
    ├── PolicyLoadRefused                            producers/gateway/sync/errors.py
    ├── GatewayRequestError(ConnectionError)         producers/sdk/errors.py
    ├── EvaluatorResultError(TypeError)              producers/sdk/errors.py
    ├── HarnessError(RuntimeError)                   producers/harnesses/errors.py
    ├── ProcessorError                               processors/errors.py
    │   └── AssemblyError(ValueError)
    ├── TrainerError                                 consumers/trainer/errors.py
    │   ├── CapabilityError(ConfigError)
    │   ├── MissingTokensError(ValueError)
    │   ├── UnreproducibleSamplingError(ValueError)
    │   ├── CheckpointError(RuntimeError)
    │   ├── SftDataError(ValueError)
    │   ├── FireworksError
    │   ├── TinkerError
    │   └── TeacherError(RuntimeError)
    │       ├── TeacherUnavailableError
    │       └── TeacherResponseError(ValueError)
    │           └── TeacherTokenMismatchError
    ├── HistoryError                                 consumers/history/errors.py
    │   ├── StoreLockedError
    │   └── QueryError(ValueError)
    │       └── StatementRefusedError               analytics SQL names what it refuses
    ├── ViewerError                                  consumers/viewer/errors.py
    │   ├── NotFoundError(LookupError)               no such run or trajectory (404)
    │   └── BadRequestError(ValueError)              a bad query parameter (400)
    └── ServingError                                 serving/errors.py
        └── RequestError(ValueError)                 a request body the model server refuses

Foreign errors are translated at the boundary by a context manager that re-raises the
most specific class ``from`` the original: ``rllm.kafka.kafka_errors`` (confluent-kafka),
``rllm.consumers.history.errors.clickhouse_errors`` (chDB, clickhouse-connect).
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
    "UnsupportedSchemaError",
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


class UnsupportedSchemaError(SchemaError):
    """A schema construct the native accelerator does not cover (the record stays on
    fastavro); ``rllm.schemas.fastpath`` raises and catches it."""


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
