"""``Trainer.flush_after`` on the real broker: a driver that rolled out N tasks gets one
update on the kept groups of those N even when uniform groups leave the batch short, and
learns when no update will come because every group was uniform."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.trainer.loop import Trainer
from rllm.kafka import EventPublisher
from rllm.schemas.topics import EPISODES
from rllm.settings import KafkaSettings
from tests.unit.consumers.trainer.factory import episode, trainer_settings


def _until(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _start(
    kafka: KafkaSettings, tiny_model: Path, tmp_path: Path, run_id: str, **more: object
) -> tuple[Trainer, threading.Thread]:
    """A trainer of run ``run_id`` on the tiny model, batches of 4, on its own thread."""
    settings = trainer_settings(
        tiny_model, tmp_path, run_id, lr=0.01, batch_size=4, episode_run_ids=("run",), **more
    )
    trainer = Trainer(settings, kafka, LocalBackend(settings))
    thread = threading.Thread(target=trainer.run, daemon=True)
    thread.start()
    return trainer, thread


def test_flush_trains_the_kept_groups_of_a_short_batch(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=2)
    trainer, thread = _start(kafka, tiny_model, tmp_path, "flush-run")
    try:
        with EventPublisher(kafka) as pub:
            # batch 1: three tasks, one all-correct (uniform, dropped), one of another run
            for eid, rewards in (("e1", (1.0, 0.0)), ("e2", (1.0, 1.0)), ("e3", (0.0, 1.0))):
                pub.publish_sync(EPISODES, eid, episode(eid, rewards=rewards))
            pub.publish_sync(EPISODES, "o1", episode("o1", run_id="other"))
        trainer.flush_after(3)
        _until(lambda: trainer.report.flushed_through == 3, "batch 1 never flushed")
        assert trainer.report.updates == 1 and trainer.core.version == 1
        assert sorted(trainer.core.state.history[-1]["episode_ids"]) == ["e1", "e3"]  # type: ignore[call-overload]  # the state's history holds dicts of objects
        assert trainer.core.batcher.drops.as_metrics()["dropped_uniform_episodes"] == 1.0

        with EventPublisher(kafka) as pub:  # batch 2: every group uniform: no update
            for eid in ("e4", "e5"):
                pub.publish_sync(EPISODES, eid, episode(eid, rewards=(0.0, 0.0)))
        trainer.flush_after(5)
        _until(lambda: trainer.report.flushed_through == 5, "batch 2 never settled")
        assert trainer.report.updates == 1 and trainer.core.version == 1
        assert trainer.report.other_runs == 1
    finally:
        trainer.stop()
        thread.join(timeout=30)


def test_a_flush_short_of_min_flush_episodes_waits_for_the_next_batch(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=1)
    trainer, thread = _start(kafka, tiny_model, tmp_path, "carry-run", min_flush_episodes=2)
    try:
        with EventPublisher(kafka) as pub:  # batch 1: one kept group of two
            for eid, rewards in (("c1", (1.0, 0.0)), ("c2", (1.0, 1.0))):
                pub.publish_sync(EPISODES, eid, episode(eid, rewards=rewards))
        trainer.flush_after(2)
        _until(lambda: trainer.report.flushed_through == 2, "batch 1 never settled")
        # no update on one group: it waits, still on version 0, for the next batch's
        assert (trainer.report.updates, trainer.core.version, trainer.core.batcher.pending) == (
            0,
            0,
            1,
        )
        with EventPublisher(kafka) as pub:  # batch 2: another kept group
            for eid, rewards in (("c3", (0.0, 1.0)), ("c4", (0.0, 0.0))):
                pub.publish_sync(EPISODES, eid, episode(eid, rewards=rewards))
        trainer.flush_after(4)
        _until(lambda: trainer.report.flushed_through == 4, "batch 2 never flushed")
        assert trainer.report.updates == 1 and trainer.core.version == 1
        assert sorted(trainer.core.state.history[-1]["episode_ids"]) == ["c1", "c3"]  # type: ignore[call-overload]  # the state's history holds dicts of objects
        assert trainer.core.batcher.pending == 0
    finally:
        trainer.stop()
        thread.join(timeout=30)
