"""Counting a run end to end: wait until every stage has settled, then follow each step the
driver sent through the history, the trajectories, the episodes and the trained episode
ids; count what is missing, what is there twice after dedup by ``event_id``, and digest the
episodes to compare runs."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from rllm.consumers.history.service import ServiceClient
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.sink import topic_pattern
from rllm.consumers.trainer.checkpoint import CheckpointStore
from rllm.kafka import make_consumer
from rllm.schemas.codec import AvroCodec
from rllm.schemas.ids import dedup_by_event_id
from rllm.schemas.topics import EPISODES, TRAJECTORIES
from rllm.schemas.types import EpisodeAssembled, TrajectoryAssembled
from rllm.settings import KafkaSettings
from tests.faults.drive import RUN_ID, Load, Progress, episode_id, task_of_session
from tests.faults.stack import HISTORY_GROUP, Stack
from tests.faults.trainer_proc import BATCH
from tests.faults.trainer_proc import RUN_ID as TRAIN_RUN
from tests.integration.helpers import read_all

__all__ = ["STAGES", "Counts", "settle", "tally"]

STAGES = (
    "history_steps",
    "trajectories",
    "episodes",
    "history_trajectories",
    "history_episodes",
    "trained",
    "partial",
)
"""What ``Counts.stages`` counts: distinct steps, trajectories, episodes per stage."""


def _wait(pred: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``pred`` every 0.5 s until it holds or ``timeout_s`` passed; whether it held."""
    deadline = time.monotonic() + timeout_s
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def _records(kafka: KafkaSettings, name: str) -> list[Any]:
    codec = AvroCodec()
    return [codec.decode(m.value() or b"") for m in read_all(kafka, kafka.topic(name), 60)]


def _end_offsets(kafka: KafkaSettings, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = make_consumer(kafka, "faults-count")
    try:
        meta = consumer.list_topics(timeout=10).topics
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
            for t in topics
            for p in meta[t].partitions
        }
    finally:
        consumer.close()


def _history_caught_up(kafka: KafkaSettings) -> bool:
    """Whether the history sink committed every record of every ``rllm.*`` topic."""
    consumer = make_consumer(kafka, HISTORY_GROUP)
    try:
        pattern = re.compile(topic_pattern(kafka))
        topics = [t for t in consumer.list_topics(timeout=10).topics if pattern.match(t)]
        ends = _end_offsets(kafka, topics)
        committed = consumer.committed([TopicPartition(t, p) for t, p in ends], timeout=10)
        # a partition never written to has no committed offset (OFFSET_INVALID, < 0)
        return all(
            tp.offset >= ends[(tp.topic, tp.partition)] or ends[(tp.topic, tp.partition)] == 0
            for tp in committed
        )
    finally:
        consumer.close()


def _trained(stack: Stack) -> list[str]:
    """Episode ids in the trainer's latest checkpoint, one per training (in order)."""
    found = CheckpointStore(stack.checkpoints, TRAIN_RUN).latest()
    return found[1].trained_episode_ids() if found else []


def settle(stack: Stack, load: Load, timeout_s: float) -> dict[str, float | None]:
    """Wait for each stage in turn: the gateway's spool drained, every episode out, the
    trainer through them, the history caught up. Returns the seconds each stage took to
    settle after the previous one, None for a stage that did not within ``timeout_s`` (all
    stages together)."""
    deadline = time.monotonic() + timeout_s

    def whole() -> int:  # episodes the trainer can train, in whole batches
        return len(_episodes(stack.kafka)) // BATCH * BATCH

    stages: dict[str, Callable[[], bool]] = {
        "spool": lambda: stack.health()["spool_depth"] == 0,
        "episodes": lambda: len(_episodes(stack.kafka)) >= load.tasks,
        "trainer": lambda: len(set(_trained(stack))) >= whole(),
        "history": lambda: _history_caught_up(stack.kafka),
    }
    took: dict[str, float | None] = {}
    for name, pred in stages.items():
        began = time.monotonic()
        held = _wait(pred, max(deadline - began, 0.0))
        took[name] = round(time.monotonic() - began, 1) if held else None
    return took


def _episodes(kafka: KafkaSettings) -> list[EpisodeAssembled]:
    return dedup_by_event_id(
        r for r in _records(kafka, EPISODES) if isinstance(r, EpisodeAssembled)
    )


def _digest(ep: EpisodeAssembled) -> tuple[Any, ...]:
    """What must be identical across runs: partial or not, and per trajectory (by session)
    its rollout index, reward, advantage and every step's index and token IDs."""
    rows = sorted(
        (
            tr.session_id,
            tr.rollout_index,
            reward,
            advantage,
            tuple(
                (s.step_index, bytes(s.prompt_token_ids), bytes(s.response_token_ids))
                for s in tr.steps
            ),
        )
        for tr, reward, advantage in zip(ep.trajectories, ep.rewards, ep.advantages, strict=True)
    )
    return (ep.is_partial, ep.group_size, tuple(rows))


@dataclass
class Counts:
    """One run, counted end to end."""

    steps_sent: int
    lost: int
    """Steps sent that are missing from any stage: the history's steps, trajectories and
    episodes tables, a trajectory and an episode on the topics, the trained episode ids."""
    duplicated: int
    """Copies left after dedup by ``event_id``: history rows (FINAL) beyond one per step,
    trajectory or episode; episode ids trained more than once."""
    stages: dict[str, int]
    """Distinct items per stage (history steps, trajectories, episodes, trained...)."""
    resent: dict[str, int]
    """Copies with an ``event_id`` already seen (dropped by the dedup; not duplicates)."""
    digest: dict[str, tuple[Any, ...]] = field(repr=False)
    """Episode id -> what must match a fault-free run."""
    trained: frozenset[str] = frozenset()
    failures: list[str] = field(default_factory=list)


def _history(stack: Stack) -> dict[str, Any]:
    """The run's steps, trajectories and episodes in the history (FINAL: one row per
    identity); nothing, with ``error`` set, when the service does not answer."""
    where = HistorySettings(history_dir=stack.history_dir)
    client = ServiceClient(where.socket_path, where.history_database)
    run = {"run": RUN_ID}
    if not client.ping():
        client.close()
        error = f"the history service does not answer on {where.socket_path}"
        return {"steps": [], "raw_steps": 0, "trajectories": [], "episodes": [], "error": error}
    try:
        steps = client.query(
            "SELECT session_id, step_index FROM rllm.steps FINAL WHERE run_id = {run:String}",
            run,
        ).rows
        raw_steps = client.query(
            "SELECT count() FROM rllm.steps WHERE run_id = {run:String}", run
        ).rows[0][0]
        trajs = client.query(
            "SELECT event_id FROM rllm.trajectories FINAL WHERE run_id = {run:String}", run
        ).column("event_id")
        eps = client.query(
            "SELECT event_id FROM rllm.episodes FINAL WHERE run_id = {run:String}", run
        ).column("event_id")
    finally:
        client.close()
    return {"steps": steps, "raw_steps": raw_steps, "trajectories": trajs, "episodes": eps}


def tally(stack: Stack, progress: Progress) -> Counts:
    """Count the run (the history service must still be running)."""
    history = _history(stack)
    raw_trajs = [
        r for r in _records(stack.kafka, TRAJECTORIES) if isinstance(r, TrajectoryAssembled)
    ]
    trajs = {t.event_id: t for t in dedup_by_event_id(raw_trajs)}
    raw_eps = [r for r in _records(stack.kafka, EPISODES) if isinstance(r, EpisodeAssembled)]
    eps = {e.event_id: e for e in dedup_by_event_id(raw_eps)}
    trained = _trained(stack)
    hist_steps = Counter((str(s), int(i)) for s, i in history["steps"])
    hist_trajs, hist_eps = Counter(history["trajectories"]), Counter(history["episodes"])
    ep_steps = {
        (tr.session_id, s.step_index)
        for ep in eps.values()
        for tr in ep.trajectories
        for s in tr.steps
    }
    tr_steps = {(t.session_id, s.step_index) for t in trajs.values() for s in t.steps}
    trained_set = set(trained)

    def delivered(sid: str, index: int) -> bool:
        ep, tr = episode_id(task_of_session(sid)), f"traj:{sid}"
        return (
            (sid, index) in hist_steps
            and (sid, index) in tr_steps
            and (sid, index) in ep_steps
            and tr in hist_trajs
            and ep in hist_eps
            and ep in trained_set
        )

    sent = set(progress.steps)
    duplicated = (
        sum(n - 1 for n in hist_steps.values())
        + sum(n - 1 for n in hist_trajs.values())
        + sum(n - 1 for n in hist_eps.values())
        + len(trained)
        - len(trained_set)
        + len(progress.steps)
        - len(sent)
    )
    return Counts(
        steps_sent=len(progress.steps),
        lost=sum(1 for sid, index in sent if not delivered(sid, index)),
        duplicated=duplicated,
        stages={
            "history_steps": len(hist_steps),
            "trajectories": len(trajs),
            "episodes": len(eps),
            "history_trajectories": len(hist_trajs),
            "history_episodes": len(hist_eps),
            "trained": len(trained_set),
            "partial": sum(1 for e in eps.values() if e.is_partial),
        },
        resent={
            "history_rows": int(history["raw_steps"]) - sum(hist_steps.values()),
            "trajectories": len(raw_trajs) - len(trajs),
            "episodes": len(raw_eps) - len(eps),
        },
        digest={eid: _digest(ep) for eid, ep in eps.items()},
        trained=frozenset(trained_set),
        failures=[*progress.failures, *([history["error"]] if "error" in history else [])],
    )
