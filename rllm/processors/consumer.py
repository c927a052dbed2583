"""faust's aiokafka consumer, corrected where it skipped records in a rebalance.

The lost-records bug (issue 19): after a rebalance, or after a peer's SIGKILL (the
survivor rebalances), a contiguous run of records on a partition was never handled. The
holes below were seen in the workers' logs of the processors' rebalance and SIGKILL tests:

1. **Acks booked while no committed offset is known.** faust drops a partition's committed
   offset at the revoke and learns it again only when it seeks, after the changelog
   recovery. Records of the previous generation still finish in between (the tail of a
   ``take_events`` buffer) or are skipped as stale, and both are acked; with no committed
   offset, ``_new_offset`` takes the first run of those acks as the commit point (180 such
   acks in one rebalance), and the periodic commit sends it past the records that the
   revoke cleared from the agents' queues.
2. **Records fetched and not delivered, their range booked as done.** faust keeps a read
   offset per partition, books any jump in it as a committable gap and drops records
   below it. A batch fetched before the recovery's seek was delivered after it ("gap
   2293..2421", 129 records never handled), and batches faust cut short (flow stopped,
   partition paused) left jumps the next fetch booked (a gap 11..404 on the scoring
   topic after a SIGKILL).

The corrections: an ack counts only for a record fetched in the current generation, on a
partition sought to its committed offset since it was assigned (any other ack releases
the record and books nothing, so it is read again: at least once, and every output is
idempotent by ``event_id``). And the fetcher's loop (``_drain_messages``) delivers the
records of the topics that ack strictly in offset order from the offset the last seek
set, and only while the streams take records (a stream that is suspended skips a record
and acks it: between the recovery's seek and the resume of the streams that lost 267 of
2,000 sessions after a SIGKILL); whatever a fetched batch held past the last record
delivered (a record past the expected one, a partition paused, the flow stopped, the
streams suspended) is sought back to, so it comes again.
No gap is ever booked, and a partition cannot stall on records fetched and dropped at the
end of its log. A record fetched for a partition not yet sought since its assignment is
not delivered (the seek brings it again).

3. **A fetch racing the seek.** faust seeks aiokafka from its own thread while the
   consumer's thread fetches; a batch fetched at the committed offset could come back
   after the seek but before the partition counted as sought, be dropped, and leave
   aiokafka's position at the end of the log: the worker stood still with records
   uncommitted behind it (a third of the rebalance runs after the corrections above).
   Partitions whose records were dropped that way are sought back once they count as
   sought, and every seek back runs on the consumer's thread, in turn with its fetches.
4. **A commit past the record at the committed offset.** faust commits the first run of
   acked offsets when it starts at most one past the committed offset (or anywhere when
   that is 0), so an unacked record at the head is skipped; here a run counts only from
   the committed offset, or from the log's start for a partition with no commit (which
   is also delivered strictly from there).
5. **Records delivered into queues that are then cleared.** After the seek faust resumes
   the flow, and ``flow_control.resume()`` clears every agent's queue: records delivered
   between the seek and that call were dropped untracked, without an ack (33 of one
   partition after a SIGKILL, its commit then stuck before them). A sought partition
   counts as sought only once the streams resume (``resume_flow``).

6. **A recovery that waits for ever.** After a worker took back partitions it had given to
   a peer that then left (the processors' fault table, ``worker-rebalance``, about one run
   in eight here), faust's recovery sought the changelogs' partition 0 to their start and
   never received a record of them: the recovery, and with it every stream, stood still.
   faust only logs that every 5 s. The fetch state when it stood still: aiokafka's position
   at the highwater, the partition active and not paused, no read offset, the flow on:
   its records were fetched and never delivered. A changelog partition that the recovery
   still needs and that gave no record for ``RECOVERY_STALL_S`` is read again from the
   next offset the recovery wants (it skips a record it has seen), its fetch state logged.

faust builds its consumer from ``Transport.Consumer``; ``GuardedApp`` swaps in a transport
whose consumer is this one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from aiokafka import TopicPartition  # type: ignore[import-untyped]  # aiokafka ships no stubs
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import ack_lock
from faust.utils.functional import consecutive_numbers
from mode.utils.futures import notify

__all__ = ["RECOVERY_STALL_S", "GuardedApp", "GuardedConsumer", "stalled_restart_offset"]

log = logging.getLogger(__name__)

RECOVERY_STALL_S = 4.0
"""Seconds without a record on a changelog partition the recovery still needs before that
partition is read again (a fetch returns within 1 s)."""


def stalled_restart_offset(
    now: float,
    started_at: float | None,
    last_record_at: float | None,
    last_restart_at: float | None,
    offset: int | None,
) -> int | None:
    """Where to read again a changelog partition of an active recovery that has had no record
    for ``RECOVERY_STALL_S`` (since the recovery started or its last record): the offset
    after the last one the recovery applied. None when it is not stalled, or was read again
    less than ``RECOVERY_STALL_S`` ago."""
    since = last_record_at if last_record_at is not None else started_at
    if since is None or now - since < RECOVERY_STALL_S:
        return None
    if last_restart_at is not None and now - last_restart_at < RECOVERY_STALL_S:
        return None
    return 0 if offset is None or offset < 0 else offset + 1


class GuardedConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer with acks and deliveries held to the last seek (module
    docstring).

    Attributes:
        refused_acks: acks not booked (fetched under an earlier generation, before the
            partition's seek, or while the streams were suspended).
        rewinds: partitions sought back because a record came past the expected one.
        recovery_restarts: changelog partitions read again because the recovery got no
            record of them (item 6).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sought: set[TP] = set()
        self._next: dict[TP, int] = {}  # next offset to deliver, of the topics that ack
        self._base: dict[TP, int] = {}  # where a partition with no commit starts
        self._skipped: set[TP] = set()  # records fetched and dropped before the seek
        self._seeking: set[TP] | None = None  # sought, waiting for the streams to resume
        self._restarted_at: dict[TP, float] = {}  # changelog partitions read again
        self._restarts: set[asyncio.Future[None]] = set()  # their seeks in flight
        self.refused_acks = 0
        self.rewinds = 0
        self.recovery_restarts = 0

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self._sought.difference_update(revoked)
        for tp in revoked:
            self._next.pop(tp, None)
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        self._sought.clear()  # sought again from the committed offsets after the recovery
        self._next.clear()
        self._base.clear()
        self._skipped.clear()
        self._seeking = None
        self._restarted_at.clear()
        await super().on_partitions_assigned(assigned, generation_id)

    async def perform_seek(self) -> None:
        generation = self.app.consumer_generation_id
        await super().perform_seek()
        if self.app.consumer_generation_id != generation:
            return  # a rebalance came: its own seek follows
        assignment = set(self.assignment())
        fresh = []
        for tp in assignment:
            committed = self._committed_offset[tp]
            if committed is None:
                self._next.pop(tp, None)  # nothing committed: the first record sets it
                fresh.append(tp)
            else:
                self._next[tp] = committed
        if fresh and self.app.conf.consumer_auto_offset_reset == "earliest":
            # records fetched before this seek were not delivered, and nothing committed
            # moves these partitions back: without this a restart's scoring topic began
            # where the fetch had got to (397 of 397 records skipped)
            earliest = await self._thread.earliest_offsets(*fresh)
            for tp in fresh:
                start = earliest.get(tp)
                if start is not None:  # delivered strictly from here, as a committed one
                    self._next[tp] = self._base[tp] = start
            await self._thread.seek_to_beginning(*(TopicPartition(*tp) for tp in fresh))
        # Delivered only once the streams resume (``resume_flow``): faust resumes the
        # flow right after this seek, and ``flow_control.resume()`` clears the agents'
        # queues, dropping what was delivered in between without an ack.
        self._seeking = assignment

    def resume_flow(self) -> None:
        super().resume_flow()
        if self._seeking is not None:
            self._sought, self._seeking = self._seeking, None

    async def seek(self, partition: TP, offset: int) -> None:
        await super().seek(partition, offset)
        self._next[partition] = offset

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - the fetcher
        """The fetcher's loop: deliver each record of a topic that acks once, in offset
        order, from the offset the last seek set. Whatever a batch held past the last record
        delivered (a record past the expected one, a partition paused, the flow stopped)
        is sought back to, so it comes again; no gap is ever booked. Other topics (the
        tables' changelogs, compacted) keep faust's rule: skip what is below the read offset.
        """
        acking = self.app.topics.acks_enabled_for
        read = self._read_offset
        commit_every = self._commit_every
        try:
            while not (self._stopped.is_set() or fetcher._stopped.is_set()):
                self.diag.set_flag(CONSUMER_FETCHING)
                await self.sleep(0)
                if self.should_stop:
                    break
                await self._seek_back_skipped()
                records, active = await self._wait_next_records(1.0)
                if not records or self.should_stop:
                    continue
                generation = self.app.consumer_generation_id
                count, held = 0, False
                for tp, record in self.scheduler.iterate(records):
                    if not self.flow_active or self.app.consumer_generation_id != generation:
                        break  # a rebalance: its seek sets what comes next
                    count += 1
                    if count % 100 == 0:
                        await asyncio.sleep(0)
                    if (
                        active is not None
                        and tp not in active
                        and tp not in self._buffered_partitions
                    ):
                        continue
                    offset = record.offset
                    if acking(tp.topic):
                        if not self.app.flow_control.is_active():
                            held = True  # a stream would skip it, and its ack would count
                            continue
                        expected = self._next.get(tp)
                        if tp not in self._sought:
                            self._skipped.add(tp)
                        if tp not in self._sought or (expected is not None and offset != expected):
                            continue  # not sought yet, delivered already, or past a hole
                    elif read[tp] is not None and offset < read[tp]:
                        continue
                    if commit_every is not None and self._n_acked >= commit_every:
                        self._n_acked = 0
                        await self.commit()
                    self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    delivery = self.callback(self._to_message(tp, record))
                    result = await self.wait_first(delivery, self.suspend_flow.wait())
                    if delivery not in result.done:
                        break  # the flow stopped (a rebalance): its seek sets what comes next
                    read[tp] = offset
                    if acking(tp.topic):
                        self._next[tp] = offset + 1
                await self._rewind(records)
                if held:  # the streams are suspended (a recovery's last steps): wait a little
                    await asyncio.sleep(0.05)
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    def verify_recovery_event_path(self, now: float, tp: TP) -> None:
        """faust's recovery calls this every 5 s for each changelog partition it still needs:
        one with no record for ``RECOVERY_STALL_S`` is read again (item 6)."""
        super().verify_recovery_event_path(now, tp)
        recovery: Any = self.app.tables.recovery  # type: ignore[attr-defined]  # faust's TableManagerT stubs lack .recovery
        if tp not in recovery.active_tps:
            return
        start = stalled_restart_offset(
            now,
            recovery._recovery_started_at,
            recovery._active_events_received_at.get(tp),
            self._restarted_at.get(tp),
            recovery.active_offsets.get(tp),
        )
        if start is None:
            return
        self._restarted_at[tp] = now
        self.recovery_restarts += 1
        log.warning(
            "%s[%d]: the recovery got no record of it for %.0f s (%s); reading it again from %d",
            tp.topic,
            tp.partition,
            RECOVERY_STALL_S,
            self._fetch_state(tp),
            start,
        )
        self._read_offset[tp] = start or None
        self.resume_partitions({tp})
        task = asyncio.ensure_future(self._seek_back(tp, start))
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    def _fetch_state(self, tp: TP) -> str:
        """What the fetch knows of ``tp``, for the log line of a stalled recovery."""
        try:
            consumer = self._thread._ensure_consumer()
            assignment = consumer._fetcher._subscriptions.subscription.assignment
            state = assignment.state_value(TopicPartition(*tp))
            highwater = self.highwater(tp)
        except Exception as exc:  # no consumer or assignment: say so
            return f"no fetch state: {exc!r}"
        position = state.position if state is not None and state.has_valid_position else None
        return (
            f"position {position}, highwater {highwater}, "
            f"paused {tp in self._paused_partitions}, "
            f"active {tp in (self._active_partitions or set())}, "
            f"read {self._read_offset.get(tp)}, flow {self.flow_active}"
        )

    async def _rewind(self, records: Any) -> None:
        """Seek each sought partition whose batch went past the next offset to deliver back
        to that offset (aiokafka's position is past records that were not delivered)."""
        for tp, batch in records.items():
            expected = self._next.get(tp)
            if not batch or tp not in self._sought or expected is None:
                continue
            if batch[-1].offset >= expected:
                self.rewinds += 1
                log.info(
                    "%s[%d]: fetched up to %d, delivered up to %d; reading again from %d",
                    tp.topic,
                    tp.partition,
                    batch[-1].offset,
                    expected - 1,
                    expected,
                )
                await self._seek_back(tp, expected)

    async def _seek_back_skipped(self) -> None:
        """A fetch that returned between the seek and the streams' resume moved aiokafka's
        position past records dropped because their partition was not sought yet; with
        nothing left to fetch the partition then stood still for good: seek those back to
        the next offset to deliver."""
        stale = self._skipped & self._sought
        for tp in stale:
            self._skipped.discard(tp)
            if tp in self._next:
                await self._seek_back(tp, self._next[tp])

    async def _seek_back(self, tp: TP, offset: int) -> None:
        """Seek on the consumer's own thread, in turn with its fetches (faust's ``_seek``
        moves aiokafka's position from this thread, racing a fetch in flight)."""
        consumer = self._thread._ensure_consumer()
        try:
            await self._thread.call_thread(consumer.seek, tp, offset)
        except Exception as exc:  # revoked meanwhile: the next assignment seeks it
            log.info("%s[%d]: not sought back to %d (%r)", tp.topic, tp.partition, offset, exc)

    def _new_offset(self, tp: TP) -> int | None:
        """The offset to commit: the end of the run of acked offsets that starts at the
        committed one. faust's rule takes the first run whatever it starts at when less
        than two past the committed offset (or when that is 0), which commits past an
        unacked record at the head."""
        acked = self._acked[tp]
        if not acked or self._gap[tp] or not self.app.topics.acks_enabled_for(tp.topic):
            return super()._new_offset(tp)
        acked.sort()
        base = self._committed_offset[tp]
        if base is None:
            base = self._base.get(tp)
        if base is not None and acked[0] != base:
            return None  # the record at the committed offset is not acked yet
        run = next(consecutive_numbers(acked))
        del acked[: len(run)]
        self._acked_index[tp].difference_update(run)
        return int(run[-1]) + 1

    def ack(self, message: Any) -> bool:
        with ack_lock:
            current = (
                message.tp in self._sought
                and message.generation_id == self.app.consumer_generation_id
                and self.app.flow_control.is_active()  # a suspended stream acks what it skips
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


class _Transport(faust_aiokafka.Transport):
    Consumer = GuardedConsumer


class GuardedApp(faust.App):
    """A faust app whose consumer is ``GuardedConsumer``."""

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
