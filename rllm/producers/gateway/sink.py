"""Where events go: Kafka through ``EventPublisher``, or the spool while Kafka is away.

While anything is spooled, new events are spooled too (behind the older ones), and a
drain task publishes the spool in order once the broker answers, then switches back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

from rllm.errors import KafkaError, KafkaUnavailableError
from rllm.kafka import EventPublisher, check_broker
from rllm.schemas.types import Record

from .errors import GatewayError
from .metrics import Metrics
from .spool import Spool

__all__ = ["EventSink"]

log = logging.getLogger("rllm.gateway")


class EventSink:
    """Publish with ack-or-spool semantics; ``await emit(..., wait=True)`` settles durably."""

    def __init__(
        self,
        publisher: EventPublisher,
        spool: Spool,
        metrics: Metrics,
        ack_timeout_s: float,
        drain_interval_s: float = 1.0,
    ) -> None:
        self.publisher = publisher
        self.spool = spool
        self.metrics = metrics
        self.ack_timeout_s = ack_timeout_s
        self.drain_interval_s = drain_interval_s
        self._lock = threading.Lock()
        self.spooling = spool.depth > 0
        self._task: asyncio.Task[None] | None = None
        self._pending: set[Future[None]] = set()

    # --- publishing -----------------------------------------------------------------
    def submit(self, topic: str, key: str, record: Record) -> Future[None]:
        """Publish or spool one event; the future resolves once Kafka acked or it is spooled.

        Raises:
            MessageTooLargeError: the event is over the topic's limit (refused, not spooled).
        """
        value = self.publisher.encode(topic, record)
        kbytes = key.encode("utf-8")
        settled: Future[None] = Future()
        with self._lock:
            if self.spooling:
                self._to_spool(topic, kbytes, value, settled)
                return settled
            t0 = time.perf_counter()
            fut = self.publisher.publish_bytes(topic, kbytes, value)
        self._pending.add(settled)
        settled.add_done_callback(self._pending.discard)

        def done(f: Future[tuple[int, int]]) -> None:
            exc = f.exception()
            if exc is None:
                self.metrics.observe(
                    "rllm_gateway_produce_latency_seconds", time.perf_counter() - t0
                )
                self.metrics.inc("rllm_gateway_events_total", outcome="acked")
                settled.set_result(None)
                return
            log.warning("Kafka did not take an event (%s); spooling", exc)
            with self._lock:
                self.spooling = True
                self._to_spool(topic, kbytes, value, settled)

        fut.add_done_callback(done)
        return settled

    def _to_spool(self, topic: str, key: bytes, value: bytes, settled: Future[None]) -> None:
        try:
            self.spool.append(topic, key, value)
        except OSError as exc:
            self.metrics.inc("rllm_gateway_events_total", outcome="lost")
            log.error("could not spool an event to %s: %s", self.spool.path, exc)
            settled.set_exception(
                GatewayError(
                    503, f"Kafka is unreachable and the spool {self.spool.path} failed: {exc}"
                )
            )
            return
        self.metrics.inc("rllm_gateway_events_total", outcome="spooled")
        settled.set_result(None)

    async def emit(self, topic: str, key: str, record: Record, wait: bool) -> None:
        """Publish one event; with ``wait`` return only once it is acked or spooled."""
        settled = self.submit(topic, key, record)
        if wait:
            await asyncio.wrap_future(settled)

    # --- draining -------------------------------------------------------------------
    def drain_once(self) -> int:
        """Publish spooled events in order while Kafka takes them; return how many went."""
        if not self.spooling:
            return 0
        try:
            check_broker(self.publisher.settings, timeout_s=min(2.0, self.ack_timeout_s))
        except KafkaUnavailableError:
            return 0
        sent = 0
        while True:
            batch = self.spool.read(500)
            if not batch:
                with self._lock:
                    if self.spool.read(1):
                        continue
                    self.spool.reset_if_empty()
                    self.spooling = False
                log.info("spool drained; publishing directly again")
                return sent
            futures = [self.publisher.publish_bytes(e.topic, e.key, e.value) for e in batch]
            done = 0
            for fut in futures:
                try:
                    fut.result(timeout=self.ack_timeout_s + 5)
                except (KafkaError, TimeoutError) as exc:
                    log.warning("spool drain stopped after %d events: %s", sent + done, exc)
                    break
                done += 1
            if done:
                self.spool.advance(batch[done - 1], done)
                self.metrics.inc("rllm_gateway_events_total", done, outcome="drained")
                sent += done
            if done < len(batch):
                return sent

    async def _drain_loop(self) -> None:
        while True:
            await asyncio.sleep(self.drain_interval_s)
            if self.spooling:
                try:
                    await asyncio.to_thread(self.drain_once)
                except Exception:  # the loop must survive anything; it logs and retries
                    log.exception("spool drain failed; retrying")

    def start(self) -> None:
        """Start the background drain (drains a previous run's spool too)."""
        self._task = asyncio.get_running_loop().create_task(self._drain_loop())

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop draining; wait for in-flight events to settle (acked or spooled)."""
        if self._task is not None:
            self._task.cancel()
        pending: list[Any] = [asyncio.wrap_future(f) for f in list(self._pending)]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        await asyncio.to_thread(self.publisher.close)
        self.spool.close()
