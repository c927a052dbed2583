"""Follow ``rllm.policy-updates`` and load each new policy version into the engine.

Each server reads the whole topic with a consumer group of its own (every server must see
every update); when it has caught up it loads the policy the log points at
(``rllm.schemas.lineage``: the latest run's newest version), if it is not loaded yet.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from rllm.kafka import make_codec, make_consumer
from rllm.schemas.lineage import PolicyPointer, advance
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import PolicyUpdated
from rllm.serving.engine import Engine
from rllm.settings import KafkaSettings

__all__ = ["PolicyFollower"]

log = logging.getLogger(__name__)


class PolicyFollower:
    """A background thread that reloads the engine on PolicyUpdated."""

    def __init__(
        self, engine: Engine, kafka: KafkaSettings, run_id: str | None = None, poll_s: float = 0.5
    ) -> None:
        self.engine, self.kafka, self.run_id, self.poll_s = engine, kafka, run_id, poll_s
        self.reloads: list[tuple[int, float]] = []
        """(version, seconds) of every reload."""
        self.errors: list[str] = []
        self.loaded: PolicyPointer | None = None
        """The run and version the engine serves (None: the weights it started with)."""
        self._failed: set[PolicyPointer] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rllm-policy-follower", daemon=True)

    def start(self) -> PolicyFollower:
        """Start following."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        codec = make_codec(self.kafka)
        consumer = make_consumer(
            self.kafka,
            f"rllm-serve-{uuid.uuid4().hex[:12]}",
            **{"topic.metadata.refresh.interval.ms": 2000},  # see a topic created later
        )
        consumer.subscribe([self.kafka.topic(POLICY_UPDATES)])
        pointer: PolicyPointer | None = None
        newest: PolicyUpdated | None = None
        try:
            while not self._stop.is_set():
                msg, idle = consumer.poll(self.poll_s), True
                while msg is not None:  # take what has arrived, then see whether that is all
                    idle = False
                    rec = self._decode(codec, msg)
                    if isinstance(rec, PolicyUpdated) and self.run_id in (None, rec.run_id):
                        moved = advance(pointer, rec)
                        if moved != pointer:
                            pointer, newest = moved, rec
                    msg = consumer.poll(0)
                if newest is None or pointer == self.loaded or pointer in self._failed:
                    continue
                if idle or _caught_up(consumer):
                    self._load(newest)
        finally:
            consumer.close()

    def _decode(self, codec: Any, msg: Any) -> Any:
        if msg.error() is not None:
            return None
        try:
            return codec.decode(msg.value() or b"")
        except Exception as exc:
            self.errors.append(f"undecodable policy update: {exc}")
            return None

    def _load(self, rec: PolicyUpdated) -> None:
        try:
            seconds = self.engine.load_checkpoint(rec.checkpoint_uri, rec.version, rec.run_id)
        except (OSError, ValueError, RuntimeError) as exc:  # keep serving, keep following
            self.errors.append(
                f"policy {rec.run_id} version {rec.version} from {rec.checkpoint_uri}: {exc}"
            )
            log.error("cannot load %s", self.errors[-1])
            self._failed.add(PolicyPointer.of(rec))
            return
        self.loaded = PolicyPointer.of(rec)
        self.reloads.append((rec.version, seconds))
        log.info("loaded policy %s version %d in %.2fs", rec.run_id, rec.version, seconds)


def _caught_up(consumer: Any) -> bool:
    """Whether the consumer has read every partition up to the high watermark its last
    fetch reported, so the newest update is known without waiting out a poll timeout
    (which added ``poll_s`` to every reload). Unknown offsets count as not caught up."""
    parts = consumer.assignment()
    if not parts:
        return False
    for tp in consumer.position(parts):
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if tp.offset < 0 or high < 0 or tp.offset < high:
            return False
    return True
