"""Scaling out mid-stream: a second worker joins, takes partitions, and leaves again.

Each rebalance moves partitions between the workers; the one that stays must restore the
table partitions it gets back from their changelogs and go on where its committed offsets
say. With faust's standby replicas, a partition that turned from standby to active on the
staying worker hung in recovery for good (``Still fetching changelog topics``, have offset
-1); the app runs without standbys now.

Before ``rllm.processors.consumer`` corrected faust's consumer, a contiguous run of records
on a partition was never handled after a rebalance in about three runs of four, and with
the first corrections the staying worker still stood still in about one run of four (a
fetch racing the seek); that module's docstring lists the holes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from rllm.schemas.ids import dedup_by_event_id
from rllm.schemas.topics import EPISODES, TRAJECTORIES
from rllm.settings import KafkaSettings
from tests.integration.helpers import members
from tests.integration.processors.helpers import (
    Workers,
    count,
    grouped_sessions,
    processors_group,
    publish,
    records,
    wait_until,
)

SESSIONS, GROUP = 2000, 4


def test_worker_joins_and_leaves_mid_stream(
    kafka: KafkaSettings, make_topics: Any, workers: Workers
) -> None:
    make_topics(partitions=3)
    events = grouped_sessions(SESSIONS, GROUP)
    cut = len(events) // 4
    publish(kafka, events[:cut])
    first = workers.start()
    wait_until(lambda: count(kafka, TRAJECTORIES) >= 50, 60, "the first trajectories")
    # the rest arrives in chunks while the second worker joins (rebalance) and leaves (again)
    rest = events[cut:]
    chunks = [rest[i : i + 400] for i in range(0, len(rest), 400)]

    def feed() -> None:
        for chunk in chunks:
            publish(kafka, chunk)
            time.sleep(0.3)

    feeder = threading.Thread(target=feed)
    feeder.start()
    second = workers.start()
    wait_until(  # it joined: the group rebalanced and gave it partitions
        lambda: members(kafka, processors_group(kafka)) == 2, 60, "the second worker to join"
    )
    assert workers.stop(second) == 0, workers.log(1)[-3000:]
    feeder.join()
    wait_until(
        lambda: len(dedup_by_event_id(records(kafka, EPISODES))) == SESSIONS // GROUP,
        90,
        lambda: (
            f"all episodes: {count(kafka, TRAJECTORIES)} trajectories, "
            f"{len(dedup_by_event_id(records(kafka, TRAJECTORIES)))} unique, "
            f"{len(dedup_by_event_id(records(kafka, EPISODES)))} unique episodes of "
            f"{SESSIONS // GROUP}; first worker's log:\n{workers.log(0)[-3000:]}"
        ),
    )
    assert workers.stop(first) == 0

    trajs = dedup_by_event_id(records(kafka, TRAJECTORIES))
    eps = dedup_by_event_id(records(kafka, EPISODES))
    assert sorted(t.session_id for t in trajs) == sorted(f"s{s}" for s in range(SESSIONS))
    assert Counter(len(e.trajectories) for e in eps) == {GROUP: SESSIONS // GROUP}
    odd = [(t.session_id, len(t.steps), t.flags) for t in trajs if len(t.steps) != 2 or t.flags]
    assert odd == [], odd[:20]
