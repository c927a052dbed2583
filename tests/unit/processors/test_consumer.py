"""The corrected faust consumer books an ack only for a record of the current assignment.

The hole it closes (seen in the rebalance test's worker logs): between a revoke and the
seek after the recovery faust knows no committed offset, and acks of records from the
previous generation became the commit point, past records the revoke had cleared. The
integration tests (``tests/integration/processors/test_rebalance.py``,
``test_crash_replay.py``) run the whole consumer against a real broker; these pin the
booking rule itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from rllm.processors.consumer import (
    RECOVERY_STALL_S,
    GuardedApp,
    GuardedConsumer,
    stalled_restart_offset,
)

TOPIC = "events"
PART = TP(TOPIC, 0)


@pytest.fixture()
def consumer() -> Iterator[GuardedConsumer]:
    app = GuardedApp("guarded-test", broker="kafka://127.0.0.1:1", autodiscover=False)
    app.topics.acking_topics.add(TOPIC)  # what faust's conductor does when an agent reads it
    app.consumer_generation_id = 7
    app.flow_control.resume()  # the streams take records (suspended: no ack counts)
    consumer = app.consumer
    assert isinstance(consumer, GuardedConsumer)
    yield consumer
    consumer._thread.thread_loop.close()  # the consumer thread's loop, made but never run
    app.loop.close()


def _message(offset: int, generation: int) -> ConsumerMessage:
    return ConsumerMessage(
        TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None, tp=PART, generation_id=generation
    )


def _ack(consumer: GuardedConsumer, offset: int, generation: int = 7) -> bool:
    message = _message(offset, generation)
    consumer.track_message(message)
    return bool(consumer.ack(message))


def test_an_ack_before_the_partitions_seek_is_not_a_commit_point(
    consumer: GuardedConsumer,
) -> None:
    # faust's own rule would commit 21 here: no committed offset known, acks 10..20
    assert [_ack(consumer, offset) for offset in range(10, 21)] == [False] * 11
    assert consumer.refused_acks == 11
    assert consumer._new_offset(PART) is None
    assert not consumer._unacked_messages  # released: a rebalance does not wait for them


def test_after_the_seek_acks_of_this_generation_count_and_older_ones_do_not(
    consumer: GuardedConsumer,
) -> None:
    consumer._sought = {PART}  # what perform_seek leaves after seeking the assignment
    consumer._committed_offset[PART] = 10
    assert _ack(consumer, 10) and _ack(consumer, 11)
    assert not _ack(consumer, 12, generation=6)  # fetched before the rebalance
    assert _ack(consumer, 13)
    assert consumer.refused_acks == 1
    # 12 is read again, so the commit point stops before it
    assert consumer._new_offset(PART) == 12


def test_an_ack_while_the_streams_are_suspended_is_not_booked(consumer: GuardedConsumer) -> None:
    # a suspended stream acks the records it skips: booking those skipped them for good
    consumer._sought = {PART}
    consumer.app.flow_control.suspend()
    assert not _ack(consumer, 5)
    assert consumer._new_offset(PART) is None


def test_an_ack_on_a_revoked_partition_is_not_booked(consumer: GuardedConsumer) -> None:
    consumer._sought = {PART, TP(TOPIC, 1)}
    consumer._sought.discard(PART)  # what on_partitions_revoked does for PART
    assert not _ack(consumer, 5)
    assert consumer._new_offset(PART) is None


@pytest.mark.parametrize(
    ("now", "last_record_at", "last_restart_at", "offset", "expected"),
    [
        (103.9, None, None, -1, None),  # 3.9 s since the recovery started: not stalled yet
        (104.0, None, None, -1, 0),  # nothing applied yet: from the start
        (104.0, None, None, None, 0),
        (110.0, 107.0, None, 41, None),  # a record 3 s ago: still flowing
        (111.0, 107.0, None, 41, 42),  # the offset after the last one applied
        (111.0, 107.0, 108.0, 41, None),  # read again 3 s ago: give it time
        (112.0, 107.0, 108.0, 41, 42),
    ],
)
def test_a_changelog_partition_without_records_is_read_again_after_the_offset_applied(
    now: float,
    last_record_at: float | None,
    last_restart_at: float | None,
    offset: int | None,
    expected: int | None,
) -> None:
    assert RECOVERY_STALL_S == 4.0
    got = stalled_restart_offset(now, 100.0, last_record_at, last_restart_at, offset)
    assert got == expected


def test_no_recovery_start_known_is_never_stalled() -> None:
    assert stalled_restart_offset(1e9, None, None, None, 5) is None
