"""Trainer -> rllm.policy-updates -> model server on the real broker: the server loads the
new weights, reports the new version, and its outputs change."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.trainer.loop import Trainer
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.kafka import EventPublisher, make_codec
from rllm.models.loading import load_model
from rllm.schemas.lineage import PolicyPointer
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import DEAD_LETTERS, EPISODES, POLICY_UPDATES
from rllm.schemas.types import DeadLetter
from rllm.serving.app import POLICY_HEADER, create_app
from rllm.serving.engine import Engine, SamplingParams
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.unit.consumers.trainer.factory import episode, trainer_settings

GREEDY = SamplingParams(temperature=0, max_tokens=6)
"""How the tests see the weights change: a greedy completion's logprobs."""


def _greedy(engine: Engine) -> Any:
    """The engine's greedy completion of one fixed prompt."""
    (output,) = engine.generate([[5, 6, 7]], [GREEDY])
    return output


def _publish_episodes(kafka: KafkaSettings, prefix: str, bad: bytes | None = None) -> None:
    """Two episodes of run ``run`` (rewards 1 and 0), after one ``bad`` record if given."""
    with EventPublisher(kafka) as pub:
        if bad is not None:
            pub.publish_bytes(EPISODES, "bad", bad).result(timeout=30)
        for i in range(2):
            pub.publish_sync(EPISODES, f"k{i}", episode(f"{prefix}-{i}", rewards=(1.0, 0.0)))


def _one_update(tiny_model: Path, tmp_path: Path, run_id: str, group_id: str) -> TrainerSettings:
    """A trainer that makes one update of a batch of two episodes."""
    return trainer_settings(
        tiny_model,
        tmp_path,
        run_id,
        lr=0.05,
        batch_size=2,
        max_updates=1,
        group_id=group_id,
        poll_timeout_s=0.2,
    )


def test_server_reloads_weights_on_policy_updated(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    make_topics(partitions=1)
    engine = Engine(load_model(str(tiny_model)))
    before = _greedy(engine)
    follower = PolicyFollower(engine, kafka, run_id="follow-run", poll_s=0.2).start()
    try:
        _publish_episodes(kafka, "f", bad=b"\x00not avro")
        settings = _one_update(tiny_model, tmp_path, "follow-run", "follow-trainer")
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
        # version 0 (the run's base weights) may be loaded first if it was read alone
        assert [v for v, _ in follower.reloads] in ([1], [0, 1])
    finally:
        follower.stop()
    after = _greedy(engine)
    assert after.logprobs != before.logprobs
    with TestClient(create_app(engine, "tiny")) as client:
        r = client.get("/v1/models")
        assert r.json()["data"][0]["policy_version"] == 1 and r.headers[POLICY_HEADER] == "1"


def test_server_switches_to_a_new_runs_base_weights(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    """Run A trained to version 1; run B starts: the server goes back to the base weights
    (B's version 0) instead of keeping A's policy, and then follows B's versions."""
    make_topics(partitions=1)
    engine = Engine(load_model(str(tiny_model)))
    base = _greedy(engine)
    follower = PolicyFollower(engine, kafka, poll_s=0.2).start()

    def settle(run: str, version: int) -> None:
        deadline = time.monotonic() + 30
        while follower.loaded != PolicyPointer(run, version) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert follower.loaded == PolicyPointer(run, version), follower.errors

    try:
        _publish_episodes(kafka, "a")
        run_a = _one_update(tiny_model, tmp_path, "run-a", "trainer-a")
        assert Trainer(run_a, kafka, LocalBackend(run_a)).run().version == 1
        settle("run-a", 1)
        trained = _greedy(engine)
        assert trained.logprobs != base.logprobs
        run_b = TrainerSettings(
            **{
                **run_a.model_dump(),
                "run_id": "run-b",
                "group_id": "trainer-b",
                "episode_run_ids": ("run-b",),  # A's episodes are not B's to train
                "idle_exit_s": 0.5,
            }
        )
        assert Trainer(run_b, kafka, LocalBackend(run_b)).run().updates == 0
        settle("run-b", 0)
        assert engine.version == 0
    finally:
        follower.stop()
    again = _greedy(engine)
    assert again.logprobs == pytest.approx(base.logprobs, abs=1e-5)


def _checkpoint(engine: Engine, directory: Path, scale: float) -> str:
    """The engine's weights times ``scale`` as a safetensors checkpoint; its file URI."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True)
    state = {k: v.detach().clone() * scale for k, v in engine.model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"))
    return directory.as_uri()


def test_follower_loads_at_once_and_only_the_newest_of_a_backlog(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    """With a poll timeout of a minute the follower still loads within seconds: it knows
    it has caught up from the partition's high watermark, not from a poll that came back
    empty. Three updates waiting when it starts give one reload, of the newest."""
    make_topics(partitions=1)
    engine = Engine(load_model(str(tiny_model)))
    uris = [_checkpoint(engine, tmp_path / f"v{v}", 1.0 + v / 10) for v in range(1, 5)]

    def update(version: int) -> PolicyUpdated:
        return PolicyUpdated(
            event_id=f"fast/v{version}",
            run_id="fast",
            version=version,
            checkpoint_uri=uris[version - 1],
        )

    with EventPublisher(kafka) as pub:
        for v in (1, 2, 3):
            pub.publish_sync(POLICY_UPDATES, "fast", update(v))
    follower = PolicyFollower(engine, kafka, poll_s=60).start()
    try:

        def settle(version: int) -> float:
            started = time.monotonic()
            while engine.version != version and time.monotonic() - started < 30:
                time.sleep(0.05)
            assert engine.version == version, follower.errors
            return time.monotonic() - started

        settle(3)
        assert [v for v, _ in follower.reloads] == [3]
        with EventPublisher(kafka) as pub:
            pub.publish_sync(POLICY_UPDATES, "fast", update(4))
        assert settle(4) < 20  # the old loop waited out poll_s (60 s) before loading
        assert [v for v, _ in follower.reloads] == [3, 4]
    finally:
        follower.stop()


def test_follower_never_adopts_a_checkpoint_it_cannot_load(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tiny_model: Path, tmp_path: Path
) -> None:
    """An earlier run's version 36 whose checkpoint is gone, then one of another model: the
    server keeps its weights and says so (version 0 on /health and in the header the gateway
    stamps steps with), and still loads the next good version."""
    from rllm.models.tiny import tiny_model_dir

    make_topics(partitions=1)
    engine = Engine(load_model(str(tiny_model)))
    other = Engine(load_model(str(tiny_model_dir(tmp_path / "other", seed=1, hidden=16))))
    foreign = _checkpoint(other, tmp_path / "foreign", 1.0)
    good = _checkpoint(engine, tmp_path / "good", 1.2)

    def update(version: int, uri: str) -> PolicyUpdated:
        return PolicyUpdated(
            event_id=f"perf/v{version}", run_id="perf", version=version, checkpoint_uri=uri
        )

    follower = PolicyFollower(engine, kafka, poll_s=0.2).start()
    try:
        with EventPublisher(kafka) as pub:
            pub.publish_sync(POLICY_UPDATES, "perf", update(36, (tmp_path / "gone").as_uri()))
            deadline = time.monotonic() + 30
            while not follower.errors and time.monotonic() < deadline:
                time.sleep(0.1)
            pub.publish_sync(POLICY_UPDATES, "perf", update(37, foreign))
            while len(follower.errors) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert "has no *.safetensors weights" in follower.errors[0]
            assert "not a checkpoint of the served model" in follower.errors[1]
            assert (engine.version, engine.policy_run, follower.loaded) == (0, "", None)
            with TestClient(create_app(engine, "tiny")) as client:
                assert client.get("/health").json()["policy_version"] == 0
                r = client.post("/v1/completions", json={"prompt": "ab", "max_tokens": 2})
                assert r.headers[POLICY_HEADER] == "0"
            pub.publish_sync(POLICY_UPDATES, "perf", update(38, good))
        while engine.version != 38 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert follower.loaded == PolicyPointer("perf", 38), follower.errors
    finally:
        follower.stop()
