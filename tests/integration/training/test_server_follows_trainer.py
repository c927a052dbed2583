"""Trainer -> rllm.policy-updates -> model server on the real broker: the server loads the
new weights, reports the new version, and its outputs change."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.backends.local.model import load_model
from rllm.consumers.trainer.loop import Trainer
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.kafka import EventPublisher, make_codec
from rllm.schemas.topics import DEAD_LETTERS, EPISODES
from rllm.schemas.types import DeadLetter
from rllm.serving.app import POLICY_HEADER, create_app
from rllm.serving.engine import Engine, SamplingParams
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.unit.training.factory import episode


def test_server_reloads_weights_on_policy_updated(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=1)
    engine = Engine(load_model(str(tiny_model)))
    greedy = SamplingParams(temperature=0, max_tokens=6)
    (before,) = engine.generate([[5, 6, 7]], [greedy])
    follower = PolicyFollower(engine, kafka, run_id="follow-run", poll_s=0.2).start()
    try:
        with EventPublisher(kafka) as pub:
            pub.publish_bytes(EPISODES, "bad", b"\x00not avro").result(timeout=30)
            for i in range(2):
                pub.publish_sync(EPISODES, f"k{i}", episode(f"f-{i}", rewards=(1.0, 0.0)))
        settings = TrainerSettings(
            model=str(tiny_model),
            checkpoint_dir=tmp_path,
            lr=0.05,
            run_id="follow-run",
            batch_size=2,
            max_updates=1,
            group_id="follow-trainer",
            poll_timeout_s=0.2,
        )
        report = Trainer(settings, kafka, LocalBackend(settings)).run()
        assert report.updates == 1 and report.version == 1
        assert report.dead_letters == 1 and report.episodes_consumed == 3
        (dead,) = read_all(kafka, kafka.topic(DEAD_LETTERS))
        letter = make_codec(kafka).decode(dead.value())
        assert isinstance(letter, DeadLetter) and letter.consumer == "trainer"
        assert letter.value == b"\x00not avro" and letter.source_offset == 0
        deadline = time.monotonic() + 30
        while engine.version != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.version == 1, follower.errors
        assert [v for v, _ in follower.reloads] == [1]
    finally:
        follower.stop()
    (after,) = engine.generate([[5, 6, 7]], [greedy])
    assert after.logprobs != before.logprobs
    with TestClient(create_app(engine, "tiny")) as client:
        r = client.get("/v1/models")
        assert r.json()["data"][0]["policy_version"] == 1 and r.headers[POLICY_HEADER] == "1"
