"""faust's aiokafka consumer, corrected so that a rebalance cannot skip records.

The lost-records bug (issue 19): after a rebalance, or after a peer's SIGKILL (the
survivor rebalances), a contiguous run of records on a partition was never handled. Both
holes were seen in the workers' logs of ``tests/integration/processors/test_rebalance.py``:

1. **Acks booked while no committed offset is known.** faust drops a partition's committed
   offset at the revoke and learns it again only when it seeks, after the changelog
   recovery. Records of the previous generation still finish in between (the tail of a
   ``take_events`` buffer) or are skipped as stale, and both are acked; with no committed
   offset, ``_new_offset`` takes the first run of those acks as the commit point (180 such
   acks in one rebalance), and the periodic commit sends it past the records that the
   revoke cleared from the agents' queues.
2. **A batch fetched before a seek, delivered after it.** The fetcher's request runs in
   aiokafka's thread while the recovery seeks the partitions to their committed offsets;
   a batch fetched from the old position came back after faust had reset its read offsets,
   so faust booked the offsets between the committed one and the batch as a committable
   gap and dropped the records of that range when they were fetched again ("gap
   2293..2421" in the log, 129 records never handled).

The corrections: an ack counts only for a record fetched in the current generation, on a
partition sought to its committed offset since it was assigned (any other ack releases
the record and books nothing, so it is read again: at least once, and every output is
idempotent by ``event_id``); and no fetch overlaps a seek, and what is left of a batch when
a seek comes is not delivered (the seek put the positions back at the committed offsets,
so it is fetched again). A gap that faust still books (none is expected: our topics are
neither compacted nor transactional) is logged as a warning with the partition and range.

faust builds its consumer from ``Transport.Consumer``; ``GuardedApp`` swaps in a transport
whose consumer is this one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, cast

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import ack_lock
from mode.utils.futures import notify

__all__ = ["GuardedApp", "GuardedConsumer"]

log = logging.getLogger(__name__)


class GuardedConsumer(faust_aiokafka.Consumer):
    """The aiokafka consumer with acks and deliveries held to the last seek (module docstring).

    Attributes:
        refused_acks: acks not booked (fetched under an earlier generation or before the
            partition's seek).
        dropped_batches: fetched batches whose rest was dropped because a seek came while
            they were delivered.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sought: set[TP] = set()
        self._seeks = 0  # seeks so far
        self._batch_seeks = 0  # ... when the batch being delivered was fetched
        self._fetch_or_seek = asyncio.Lock()  # a fetch never overlaps a seek
        self.refused_acks = 0
        self.dropped_batches = 0

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self._sought.difference_update(revoked)
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        self._sought.clear()  # sought again from the committed offsets after the recovery
        await super().on_partitions_assigned(assigned, generation_id)

    async def perform_seek(self) -> None:
        async with self._fetch_or_seek:
            generation = self.app.consumer_generation_id
            try:
                await super().perform_seek()
            finally:
                self._seeks += 1
            if self.app.consumer_generation_id == generation:
                self._sought = set(self.assignment())

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> Mapping[TP, Any]:
        async with self._fetch_or_seek:
            records: Mapping[TP, Any] = await super()._getmany(active_partitions, timeout)
            self._batch_seeks = self._seeks
            return records

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        batch = cast(AsyncGenerator[tuple[TP, Any], None], super().getmany(timeout))
        try:
            async for tp, message in batch:
                if self._seeks != self._batch_seeks:
                    # a seek since this batch was fetched put the positions back at the
                    # committed offsets: the rest comes again from there
                    self.dropped_batches += 1
                    log.info(
                        "a seek came while a fetched batch was delivered; the rest of it "
                        "(from %s[%d]@%d) is read again from the committed offsets",
                        message.topic,
                        message.partition,
                        message.offset,
                    )
                    break
                yield tp, message
        finally:
            await batch.aclose()

    def ack(self, message: Any) -> bool:
        with ack_lock:
            current = (
                message.tp in self._sought
                and message.generation_id == self.app.consumer_generation_id
            )
            if current or message.acked:
                return bool(super().ack(message))
            message.acked = True
            self._unacked_messages.discard(message)
            self.refused_acks += 1
            notify(self._waiting_for_ack)
        log.debug(
            "not booking the ack of %s[%d]@%d (fetched under generation %s, now %s, or "
            "before the partition's seek); it is read again from the committed offset",
            message.topic,
            message.partition,
            message.offset,
            message.generation_id,
            self.app.consumer_generation_id,
        )
        return False

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        log.warning(
            "faust booked offsets %d..%d of %s[%d] as a gap (records it will not read); "
            "committed offset %s",
            offset_from,
            offset_to,
            tp.topic,
            tp.partition,
            self._committed_offset[tp],
        )
        await super()._add_gap(tp, offset_from, offset_to)


class _Transport(faust_aiokafka.Transport):
    Consumer = GuardedConsumer


class GuardedApp(faust.App):
    """A faust app whose consumer is ``GuardedConsumer``."""

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
