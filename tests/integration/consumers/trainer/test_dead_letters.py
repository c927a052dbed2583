"""The trainer on the real broker refuses what is not an episode: each such record goes to
``rllm.dead-letters`` with the reason, its offset is committed with the update, and the
episodes around it are trained."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import TopicPartition

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.trainer.loop import Trainer
from rllm.kafka import EventPublisher, make_consumer
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import DEAD_LETTERS, EPISODES
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.unit.consumers.trainer.factory import episode, trainer_settings


def test_records_that_are_not_episodes_are_dead_lettered_and_committed_with_the_update(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=1)
    topic = kafka.topic(EPISODES)
    group = f"dl-trainer-{uuid.uuid4().hex[:6]}"
    settings = trainer_settings(
        tiny_model, tmp_path, "dl-run", lr=0.01, batch_size=2, group_id=group, max_updates=1
    )
    wrong = PolicyUpdated(event_id="x/v1", run_id="x", version=1, checkpoint_uri="file:///x")
    with EventPublisher(kafka) as pub:
        records = [
            pub.codec.encode(episode("e1"), topic=topic),
            b"\xc3\x01garbage",
            pub.codec.encode(wrong, topic=topic),
            pub.codec.encode(episode("e2"), topic=topic),
        ]
        for i, value in enumerate(records):
            pub.publish_bytes(EPISODES, f"k{i}", value, partition=0).result(timeout=30)
    trainer = Trainer(settings, kafka, LocalBackend(settings))
    thread = threading.Thread(target=trainer.run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the trainer did not stop after its one update"

    report = trainer.report
    assert (report.updates, report.episodes_consumed, report.dead_letters) == (1, 4, 2)
    assert sorted(trainer.core.state.history[-1]["episode_ids"]) == ["e1", "e2"]  # type: ignore[call-overload]  # the state's history holds dicts of objects
    assert trainer.core.state.offsets == {topic: {"0": 4}}

    letters = [pub.codec.decode(m.value()) for m in read_all(kafka, kafka.topic(DEAD_LETTERS))]
    assert [(x.source_offset, x.key, x.value) for x in letters] == [
        (1, b"k1", records[1]),
        (2, b"k2", records[2]),
    ]
    assert [x.error_type for x in letters] == ["DecodeError", "SchemaError"]
    assert letters[1].reason == f"expected EpisodeAssembled on {topic}, got PolicyUpdated"
    assert {x.consumer for x in letters} == {"trainer"}

    consumer = make_consumer(kafka, group)
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
        assert committed == 4
    finally:
        consumer.close()
