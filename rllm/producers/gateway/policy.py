"""Follow ``rllm.policy-updates``: each ``PolicyUpdated`` goes to ``on_update`` in log order."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from confluent_kafka import KafkaError as _KE

from rllm.kafka import make_codec, make_consumer
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import PolicyUpdated
from rllm.settings import KafkaSettings

__all__ = ["PolicyFollower"]

log = logging.getLogger("rllm.gateway")


class PolicyFollower:
    """A daemon thread reading policy updates from the beginning; calls ``on_update``."""

    def __init__(self, kafka: KafkaSettings, on_update: Callable[[PolicyUpdated], None]) -> None:
        self._kafka = kafka
        self._on_update = on_update
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rllm-policy-follower", daemon=True)

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def _run(self) -> None:
        codec = make_codec(self._kafka)
        consumer = make_consumer(
            self._kafka,
            f"rllm-gateway-{uuid.uuid4().hex[:12]}",
            **{"topic.metadata.refresh.interval.ms": 2000},
        )
        consumer.subscribe([self._kafka.topic(POLICY_UPDATES)])
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() not in (_KE.UNKNOWN_TOPIC_OR_PART, _KE._PARTITION_EOF):
                        log.warning("policy updates: %s", err.str())
                    continue
                try:
                    update = codec.decode(msg.value() or b"")
                except Exception as exc:  # a bad record must not stop the follower
                    log.warning(
                        "policy updates: undecodable record at offset %s: %s", msg.offset(), exc
                    )
                    continue
                if isinstance(update, PolicyUpdated):
                    self._on_update(update)
        finally:
            consumer.close()

    def stop(self) -> None:
        """Stop and join the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
