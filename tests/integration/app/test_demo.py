"""The demo (``rllm-cli demo``'s work) on the real broker with a tiny budget: a real gateway
in front of the local model server (a tiny random model) that already serves another run's
policy, a real processors worker, the local backend; before and after on held-out tasks
that are never trained on."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rllm.app.demo import held_out_split, run_demo
from rllm.consumers import backends
from rllm.kafka import EventPublisher
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.settings import KafkaSettings
from tests.integration.app.fixtures import LoopStack, short_demo_config
from tests.integration.helpers import read_all

RUN = "demo-test"


def test_demo_trains_on_train_tasks_and_evaluates_the_trained_policy_on_held_out_ones(
    kafka: KafkaSettings,
    tiny_model: Path,
    loop_stack: Callable[..., LoopStack],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the demo loads the trainer's model once (it built a second TrainerCore to serve v0)
    loaded: list[str] = []
    real_make_backend = backends.make_backend

    def make_backend(settings: Any) -> Any:
        loaded.append(settings.run_id)
        return real_make_backend(settings)

    monkeypatch.setattr(backends, "make_backend", make_backend)
    stack = loop_stack("demo-admin-key")  # the server follows every run: an earlier one too
    engine, follower, gateway = stack.engine, stack.follower, stack.gateway
    # an earlier run's policy, served when the demo starts: "before" must not measure it
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for weights in tiny_model.glob("*.safetensors"):
        (earlier / weights.name).write_bytes(weights.read_bytes())
    with EventPublisher(kafka) as pub:
        pub.publish_sync(
            POLICY_UPDATES,
            "earlier",
            PolicyUpdated(
                event_id="earlier/v7", run_id="earlier", version=7, checkpoint_uri=str(earlier)
            ),
        )
    deadline = time.monotonic() + 30
    while engine.version != 7 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine.version == 7, follower.errors
    lines: list[str] = []
    try:
        report = run_demo(
            short_demo_config(RUN, gateway.url, tiny_model, tmp_path, held_out=3, batch_size=2),
            kafka,
            say=lines.append,
        )
    finally:
        stack.close()

    assert loaded == [RUN], "the demo loaded the trainer's model once"
    train, test = held_out_split(3)
    assert report.held_out_ids == [t.task_id for t in test] == ["mul-3x7", "mul-6x4", "mul-3x9"]
    assert set(report.trained_ids) == {t.task_id for t in train} and len(train) == 61
    codec = AvroCodec()
    episodes = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(EPISODES))]
    trained = [e.task.task_id for e in episodes if e.run_id == RUN]
    assert sorted(trained) == sorted(t.task_id for t in train[:4]), trained  # 2 batches of 2
    assert not set(trained) & set(report.held_out_ids)
    # before: the run's base weights, not the earlier run's v7; after: the trained v2
    assert (report.before.policy_run, report.before.policy_version) == (RUN, 0)
    assert (report.after.policy_run, report.after.policy_version) == (RUN, 2)
    assert (report.before.tasks, report.after.tasks) == (3, 3)
    progress = [line for line in lines if line.startswith("batch ")]
    assert [line.split(":")[0] for line in progress] == [
        "batch 1, update 1/2",
        "batch 2, update 2/2",
    ], lines
    assert "rollouts of v0:" in progress[0] and "-> v1;" in progress[0]
    assert "rollouts of v1:" in progress[1] and "-> v2;" in progress[1]
    said = re.fullmatch(
        r"held-out reward: before (\d\.\d\d) -> after (\d\.\d\d) \(3 held-out multiply tasks; "
        r"policy 0 \(run demo-test\) -> 2 \(run demo-test\)\)",
        report.line(),
    )
    assert said is not None, report.line()
    assert float(said[1]) == round(report.before.mean_reward, 2)
    assert float(said[2]) == round(report.after.mean_reward, 2)
    assert report.plot == tmp_path / "curve.png"
    assert (
        report.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and report.plot.stat().st_size > 5000
    )
