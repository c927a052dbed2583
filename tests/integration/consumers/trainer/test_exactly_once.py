"""Crash-resume on the real broker: the trainer process is killed between update and
commit at two points; after restarts every episode is trained exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import TopicPartition

from rllm.consumers.trainer.checkpoint import CheckpointStore
from rllm.kafka import EventPublisher, make_codec, make_consumer
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.settings import KafkaSettings
from tests.integration.consumers.trainer.trainer_proc import CRASH_EXIT
from tests.integration.helpers import read_all
from tests.paths import ROOT
from tests.unit.consumers.trainer.factory import episode

N_EPISODES = 12  # batch_size 2 -> 6 updates


def _run(
    kafka: KafkaSettings, model: Path, ckpt: Path, crash: str = ""
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "tests.integration.consumers.trainer.trainer_proc",
        "--bootstrap",
        kafka.bootstrap_servers,
        "--prefix",
        kafka.topic_prefix,
        "--model",
        str(model),
        "--checkpoints",
        str(ckpt),
    ]
    if crash:
        cmd += ["--crash", crash]
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    print(f"trainer run {crash or 'to the end'}: {time.monotonic() - started:.1f}s")
    return out


def _committed(kafka: KafkaSettings) -> dict[int, int]:
    consumer = make_consumer(kafka, "crash-trainer")
    try:
        topic = kafka.topic(EPISODES)
        parts = [TopicPartition(topic, p) for p in range(2)]
        return {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=10)}
    finally:
        consumer.close()


def test_killed_between_update_and_commit_trains_every_episode_exactly_once(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=2)
    ids = [f"ep-{i:02d}" for i in range(N_EPISODES)]
    with EventPublisher(kafka) as pub:
        for i, eid in enumerate(ids):
            pub.publish_sync(EPISODES, f"key-{i}", episode(eid, rewards=(1.0, 0.0)))
    ckpt = tmp_path / "ckpt"
    store = CheckpointStore(ckpt, "crash-run")

    # 1. dies after the 2nd update, before its checkpoint: update 2 is lost with its offsets
    r = _run(kafka, tiny_model, ckpt, "after_update:2")
    assert r.returncode == CRASH_EXIT, r.stderr[-2000:]
    found = store.latest()
    assert found is not None and found[1].version == 1

    # 2. dies after checkpoint 3 is written, before publish and commit
    r = _run(kafka, tiny_model, ckpt, "after_checkpoint:3")
    assert r.returncode == CRASH_EXIT, r.stderr[-2000:]
    found = store.latest()
    assert found is not None and found[1].version == 3
    saved = found[1].offsets[kafka.topic(EPISODES)]
    committed = _committed(kafka)
    # Kafka's committed offsets lag the checkpoint: trusting them would retrain episodes
    assert sum(committed.values()) < sum(saved.values()), (committed, saved)

    # 3. runs to the end of the topic (re-announces version 3, whose publish was lost)
    r = _run(kafka, tiny_model, ckpt)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["version"] == 6

    found = store.latest()
    assert found is not None
    state = found[1]
    trained = state.trained_episode_ids()
    assert Counter(trained) == Counter(ids), Counter(trained)  # each exactly once
    assert [h["version"] for h in state.history] == [1, 2, 3, 4, 5, 6]
    assert all(len(h["episode_ids"]) == 2 for h in state.history)  # type: ignore[arg-type]  # the state's history holds dicts of objects
    committed = _committed(kafka)
    assert sum(max(o, 0) for o in committed.values()) == N_EPISODES, committed

    codec = make_codec(kafka)
    events = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
    assert all(isinstance(e, PolicyUpdated) for e in events)
    by_version = {e.version: e for e in events if isinstance(e, PolicyUpdated)}
    assert sorted(by_version) == [0, 1, 2, 3, 4, 5, 6]  # 0: the fresh run's base weights
    # a re-announced version carries the same event id, so consumers deduplicate it
    assert all(
        e.event_id == f"crash-run/v{e.version}" for e in events if isinstance(e, PolicyUpdated)
    )
    assert Path(by_version[6].checkpoint_uri.removeprefix("file://")).is_dir()
