"""The trainer consumer: ``rllm.episodes`` -> batches -> backend updates -> checkpoints
(with the offsets they consumed) -> ``PolicyUpdated`` on ``rllm.policy-updates``.

Order of one update: backend.update, write the checkpoint (weights + offsets + trained
episode ids), publish PolicyUpdated, commit the offsets to Kafka. A crash before the
checkpoint is written loses the update and its offsets together (the episodes are trained
again on the old weights, once); a crash after it resumes from the checkpoint's offsets,
whatever Kafka's committed offsets say. So every episode is trained exactly once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rllm.consumers.trainer.core import FaultHook, TrainerCore
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import TrainingBackend
from rllm.errors import KafkaUnavailableError, SchemaError, TopicError
from rllm.kafka import ConsumedRecord, EventPublisher, TopicReader, dead_letters_to, make_codec
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.schemas.types import EpisodeAssembled
from rllm.settings import KafkaSettings

__all__ = ["Trainer", "TrainerReport", "run_trainer"]

log = logging.getLogger(__name__)

RETRY_S = 1.0
"""Seconds between attempts to publish or commit an update while Kafka is unreachable."""


@dataclass
class TrainerReport:
    """What a trainer run did."""

    updates: int = 0
    version: int = 0
    episodes_consumed: int = 0
    episodes_settled: int = 0
    """Episodes whose handling, and any update they triggered, has finished."""
    other_runs: int = 0
    """Episodes skipped because they belong to a run not in ``episode_run_ids``."""
    dead_letters: int = 0
    announced: bool = False
    """Whether the starting policy version was published."""
    flushed_through: int = 0
    """The last ``flush_after`` point whose episodes are settled and trained."""
    drops: dict[str, float] = field(default_factory=dict)
    """What the batcher refused, by reason (``DropCounts.as_metrics``)."""
    messages: list[str] = field(default_factory=list)
    """The batcher's refusal messages, most recent last."""
    last_metrics: dict[str, float] = field(default_factory=dict)

    def all_refused(self) -> str | None:
        """Why the run failed when it made no update and refused every episode of its runs
        it read (dead-lettered, or refused by the batcher: missing tokens, wrong estimator,
        unreproducible sampling), naming the first refusal; None otherwise. Uniform groups
        dropped, stale and duplicate episodes are not refusals: those runs end normally."""
        ours = self.episodes_consumed - self.other_runs
        refused = self.dead_letters + sum(
            int(v) for k, v in self.drops.items() if k.startswith("refused_")
        )
        if self.updates or ours <= 0 or refused < ours:
            return None
        first = self.messages[0] if self.messages else "episodes dead-lettered"
        return f"every one of the {ours} episodes it read was refused; the first: {first}"


class Trainer:
    """The Kafka consumer around ``TrainerCore``."""

    def __init__(
        self,
        settings: TrainerSettings,
        kafka: KafkaSettings,
        backend: TrainingBackend,
        fault: FaultHook | None = None,
    ) -> None:
        self.settings = settings
        self.kafka = kafka
        self.core = TrainerCore(settings, backend)
        self.fault = fault
        self.codec = make_codec(kafka)
        self.topic = kafka.topic(EPISODES)
        self.report = TrainerReport(version=self.core.version)
        self._offsets: dict[str, dict[str, int]] = {
            t: dict(p) for t, p in self.core.state.offsets.items()
        }
        self._stop = False
        self._flush_after: int | None = None
        self._changed = threading.Condition()
        """Notified when the run announces its policy, flushes, or ends."""
        self._ended = False
        self.failure: BaseException | None = None
        """What ended ``run()`` with an error (set before ``announced``/``flushed`` wake)."""

    @property
    def version(self) -> int:
        """The policy version the backend holds now."""
        return self.core.version

    def stop(self) -> None:
        """Ask the loop to stop after the current poll."""
        self._stop = True

    def announced(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for ``run()`` to publish the policy it starts from;
        whether it has (False also when the run ended first)."""
        return self._wait_for(lambda: self.report.announced, timeout_s)

    def flushed(self, episodes: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the ``flush_after(episodes)`` point: every such
        episode settled and the kept ones trained; whether it was reached (False also when
        the run ended first)."""
        return self._wait_for(lambda: self.report.flushed_through >= episodes, timeout_s)

    def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: done() or self._ended, timeout_s)
            return done()

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def flush_after(self, episodes: int) -> None:
        """Train the pending batch, full or not (if it holds ``min_flush_episodes``; fewer
        wait for the next batch's), as soon as ``episodes`` episodes of the wanted runs
        have been settled in all: a driver that rolled out that many tasks waits for their
        update (uniform groups dropped leave the batch short)."""
        self._flush_after = episodes

    def _check_flush(self, reader: TopicReader, publisher: EventPublisher) -> None:
        """Once the episodes ``flush_after`` waits for are settled, train what is pending
        and record the point as flushed (``report.flushed_through``)."""
        target = self._flush_after
        if target is None or self.report.flushed_through >= target:
            return
        if self.report.episodes_settled - self.report.other_runs < target:
            return
        if self.core.batcher.pending >= self.core.settings.min_flush_episodes:
            self._update(reader, publisher)
        self.report.flushed_through = target
        self._notify()

    def _assign(self, reader: TopicReader) -> None:
        """Take every partition, at the checkpoint's offsets where it has them (else the
        group's committed offset, else the beginning). One trainer consumes a run."""
        partitions = reader.partitions(self.topic)
        if not partitions:
            raise TopicError(f"topic {self.topic} does not exist; create it (rllm-cli up)")
        saved = self.core.state.offsets.get(self.topic, {})
        reader.assign(self.topic, partitions, "committed", {int(p): o for p, o in saved.items()})

    def _handle(self, rec: ConsumedRecord) -> None:
        """Count one episode read (the reader dead-lettered it already when refused)."""
        parts = self._offsets.setdefault(rec.topic, {})
        parts[str(rec.partition)] = rec.offset + 1
        self.report.episodes_consumed += 1
        if rec.error is not None:
            self.report.dead_letters += 1
            return
        record: EpisodeAssembled = rec.event
        wanted = self.settings.episode_run_ids
        if wanted and record.run_id not in wanted:
            self.report.other_runs += 1
            return
        self.core.batcher.add(record, self.core.version)

    def _until_taken(self, what: str, call: Callable[[], object]) -> None:
        """Run ``call`` until Kafka takes it. The update is checkpointed already, so while
        the broker is away the trainer waits for it instead of dying with the update done
        (a PolicyUpdated sent again keeps its event id). ``stop()`` ends the wait."""
        while True:
            try:
                call()
                return
            except KafkaUnavailableError as exc:
                if self._stop:
                    raise
                log.warning("%s: %s; trying again in %.0f s", what, exc, RETRY_S)
                time.sleep(RETRY_S)

    def _update(self, reader: TopicReader, publisher: EventPublisher) -> None:
        offsets = {t: dict(p) for t, p in self._offsets.items()}
        result, event = self.core.train_pending(offsets, self.fault)
        self._until_taken(
            f"announcing policy version {result.version}",
            lambda: publisher.publish_sync(POLICY_UPDATES, self.settings.run_id, event),
        )
        if self.fault:
            self.fault("after_publish", result.version)
        self._until_taken(
            f"committing the offsets of policy version {result.version}",
            lambda: reader.commit(self._offsets),
        )
        if self.fault:
            self.fault("after_commit", result.version)
        self.report.updates += 1
        self.report.version = result.version
        self.report.last_metrics = dict(event.metrics)
        log.info(
            "policy version %d: %s",
            result.version,
            {k: round(v, 4) for k, v in event.metrics.items()},
        )

    def run(self) -> TrainerReport:
        """Consume until ``max_updates``, ``idle_exit_s`` or ``stop()``; an error that ends
        the run is kept in ``failure`` before ``announced``/``flushed`` waiters wake."""
        try:
            return self._consume()
        except BaseException as exc:
            self.failure = exc
            raise
        finally:
            self._ended = True
            self._notify()

    def _consume(self) -> TrainerReport:
        s = self.settings
        publisher = EventPublisher(self.kafka, codec=self.codec)
        reader = TopicReader(
            self.kafka,
            s.group_id,
            name="trainer",
            codec=self.codec,
            expect=EpisodeAssembled,
            refuse=(SchemaError,),
            dead_letter=dead_letters_to(publisher),
            on_error="log",
        )
        try:
            # Announce the policy this run serves from: version 0 (its base weights) on a
            # fresh run, else the version it resumed from (that publish may have been lost).
            if not self.core.resumed:
                self.core.write_base()
            publisher.publish_sync(POLICY_UPDATES, s.run_id, self.core.policy_event())
            self.report.announced = True
            self._notify()
            self._assign(reader)
            idle_since = time.monotonic()
            while not self._stop:
                if s.max_updates and self.report.updates >= s.max_updates:
                    break
                rec = reader.poll(s.poll_timeout_s)
                if rec is None:
                    self._check_flush(reader, publisher)
                    if s.idle_exit_s and time.monotonic() - idle_since > s.idle_exit_s:
                        break
                    continue
                idle_since = time.monotonic()
                self._handle(rec)
                if self.core.batcher.ready():
                    self._update(reader, publisher)
                self.report.episodes_settled += 1
                self._check_flush(reader, publisher)
        finally:
            self.report.drops = self.core.batcher.drops.as_metrics()
            self.report.messages = list(self.core.batcher.drops.messages)
            self.report.version = self.core.version
            publisher.close()
            reader.close()
        return self.report


def run_trainer(settings: TrainerSettings, kafka: KafkaSettings, **kwargs: Any) -> TrainerReport:
    """Build the backend named in ``settings`` and run the trainer."""
    from rllm.consumers.backends import make_backend

    backend = make_backend(settings)
    try:
        return Trainer(settings, kafka, backend, **kwargs).run()
    finally:
        backend.close()
