"""``PolicyFollower``: every gateway, model server and sync trainer reads
``rllm.policy-updates`` from the beginning, in log order, through a ``TopicReader`` of its
own: gateways and servers the trainers' ``PolicyUpdated``, trainers the gateways'
``PolicyServed``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from rllm.errors import KafkaUnavailableError
from rllm.kafka.consume import TopicReader
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.settings import KafkaSettings

__all__ = ["PolicyFollower", "read_policy_log"]

log = logging.getLogger(__name__)


class PolicyFollower:
    """A daemon thread that reads ``rllm.policy-updates`` from the beginning, in log order.

    Each follower has a consumer group of its own (every gateway and model server must see
    every update). After each poll round it calls ``on_updates(updates, caught_up)`` with the
    records of the ``records`` types read in that round (possibly none) and whether it has read all
    the log held at its last fetch, so a caller that acts on the newest update only (the
    model server's reload) need not wait out a poll timeout. An undecodable record is logged
    and kept in ``errors``; it never stops the follower.

    Args:
        kafka: where Kafka is.
        on_updates: called on the follower's thread.
        name: names the consumer group (``rllm-<name>-<random>``) and the thread.
        poll_s: how long one poll waits for a record.
        records: the record types handed over (others on the topic are skipped).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        on_updates: Callable[[list[Any], bool], None],
        *,
        name: str,
        poll_s: float = 0.5,
        records: tuple[type[Any], ...] = (PolicyUpdated,),
    ) -> None:
        self.kafka, self.name, self.poll_s, self.records = kafka, name, poll_s, records
        self._on_updates = on_updates
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rllm-{name}-policy", daemon=True)

    def start(self) -> PolicyFollower:
        """Start following."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        reader = TopicReader(
            self.kafka,
            f"rllm-{self.name}-{uuid.uuid4().hex[:12]}",
            name="policy updates",
            refuse=(Exception,),  # a bad record must not stop the follower
            on_error="log",
            config={"topic.metadata.refresh.interval.ms": 2000},  # see a topic created later
        )
        reader.subscribe([self.kafka.topic(POLICY_UPDATES)])
        try:
            while not self._stop.is_set():
                updates: list[Any] = []
                # take what has arrived, then see whether that is all
                for rec in reader.read_available(self.poll_s):
                    if rec.error is not None:
                        self.errors.append(
                            f"undecodable policy update at offset {rec.offset}: {rec.error}"
                        )
                        log.warning("policy updates: %s", self.errors[-1])
                    elif isinstance(rec.event, self.records):
                        updates.append(rec.event)
                self._on_updates(updates, reader.quiet or reader.caught_up())
        finally:
            reader.close()


def read_policy_log(kafka: KafkaSettings, timeout_s: float = 30.0) -> list[PolicyUpdated]:
    """Every ``PolicyUpdated`` on ``rllm.policy-updates`` now, in log order (an undecodable
    record is skipped, as a follower skips it); empty when the topic does not exist.

    Raises:
        KafkaUnavailableError: the log's end was not reached within ``timeout_s``.
    """
    topic = kafka.topic(POLICY_UPDATES)
    reader = TopicReader(
        kafka,
        f"rllm-policy-log-{uuid.uuid4().hex[:12]}",
        name="policy log",
        refuse=(Exception,),
        on_error="log",
        config={"enable.partition.eof": True},
    )
    try:
        partitions = reader.partitions(topic)
        reader.assign(topic, partitions, "beginning")
        records: list[PolicyUpdated] = []
        deadline = time.monotonic() + timeout_s
        while not all((topic, p) in reader.ended for p in partitions):
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"{topic} was not read to its end within {timeout_s:.0f} s on "
                    f"{kafka.bootstrap_servers}"
                )
            for rec in reader.read_available(0.2):
                if rec.error is None and isinstance(rec.event, PolicyUpdated):
                    records.append(rec.event)
        return records
    finally:
        reader.close()
