"""Kafka's errors as ours: ``translate`` maps a confluent-kafka error to the most specific
``rllm.errors.KafkaError`` and ``kafka_errors`` does it for a block (like httpx's
``map_httpcore_exceptions``). The classes themselves live in ``rllm.errors``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

from rllm.errors import KafkaError, KafkaUnavailableError, MessageTooLargeError, TopicError

__all__ = [
    "KafkaError",
    "KafkaUnavailableError",
    "MessageTooLargeError",
    "TopicError",
    "error_code",
    "is_already_exists",
    "is_end_of_partition",
    "is_unknown_topic",
    "kafka_errors",
    "translate",
]

_KE = confluent_kafka.KafkaError
_UNAVAILABLE = {
    _KE._TRANSPORT,
    _KE._ALL_BROKERS_DOWN,
    _KE._TIMED_OUT,
    _KE._MSG_TIMED_OUT,
    _KE._RESOLVE,
    # a commit while the broker is down waits ~46 s for the group coordinator, then fails
    # with these: the broker is away, not the request wrong
    _KE._WAIT_COORD,
    _KE.COORDINATOR_NOT_AVAILABLE,
    _KE.NOT_COORDINATOR,
    _KE.COORDINATOR_LOAD_IN_PROGRESS,
}
_TOO_LARGE = {_KE.MSG_SIZE_TOO_LARGE, _KE.RECORD_LIST_TOO_LARGE, _KE.INVALID_MSG_SIZE}


def error_code(err: Any) -> int | None:
    """The librdkafka code of a confluent-kafka ``KafkaError`` or ``KafkaException``."""
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    return kerr.code() if isinstance(kerr, _KE) else None


def is_end_of_partition(err: Any) -> bool:
    """Whether ``err`` only says a partition has been read to its end."""
    return error_code(err) == _KE._PARTITION_EOF


def is_unknown_topic(err: Any) -> bool:
    """Whether ``err`` says a topic (or partition) does not exist (yet)."""
    return error_code(err) == _KE.UNKNOWN_TOPIC_OR_PART


def is_already_exists(err: Any) -> bool:
    """Whether ``err`` says a topic being created exists already."""
    return error_code(err) == _KE.TOPIC_ALREADY_EXISTS


def translate(err: Any, context: str) -> KafkaError:
    """Map a confluent-kafka ``KafkaError`` (or exception) to the most specific RllmError."""
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    code = kerr.code() if isinstance(kerr, _KE) else None
    text = kerr.str() if isinstance(kerr, _KE) else str(kerr)
    if code in _UNAVAILABLE:
        return KafkaUnavailableError(
            f"{context}: Kafka unreachable ({text}); is the broker running? (rllm-cli up)"
        )
    if code in _TOO_LARGE:
        return MessageTooLargeError(f"{context}: message too large for the broker ({text})")
    if code in (_KE.UNKNOWN_TOPIC_OR_PART, _KE.TOPIC_ALREADY_EXISTS, _KE.INVALID_CONFIG):
        return TopicError(f"{context}: {text}")
    return KafkaError(f"{context}: {text}")


@contextmanager
def kafka_errors(context: str) -> Iterator[None]:
    """Re-raise confluent-kafka errors inside the block as RllmErrors naming ``context``."""
    try:
        yield
    except KafkaException as exc:
        raise translate(exc, context) from exc
