"""AgentTrainer runs the whole loop on the real broker: rollouts through a real gateway in
front of the local model server (a tiny random model), episodes from a real processors
worker, updates by the local backend, new versions taken by the server and the gateway."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx

import rllm
from rllm.app import UpdateRecord
from rllm.kafka import EventPublisher
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.run import run_estimator
from rllm.schemas.topics import EPISODES, POLICY_UPDATES, SESSION_EVENTS
from rllm.schemas.types import Task
from rllm.settings import KafkaSettings
from tests.integration.app.agents import by_index, post, short_run_config
from tests.integration.app.fixtures import LoopStack
from tests.integration.helpers import read_all
from tests.unit.consumers.trainer.factory import episode

RUN = "loop-run"


@rllm.rollout(name="completer")
async def completer(task: Task, config: RolloutConfig) -> str:
    answer = await post(config, "/completions", {"prompt": task.instruction})
    return str(answer["choices"][0]["text"])


def test_agent_trainer_closes_the_loop(
    kafka: KafkaSettings,
    tiny_model: Path,
    loop_stack: Callable[..., LoopStack],
    tmp_path: Path,
) -> None:
    stack = loop_stack("loop-admin-key", run_id=RUN)
    engine, follower, server, gateway = stack.engine, stack.follower, stack.server, stack.gateway
    with EventPublisher(kafka) as pub:  # episodes of another run on the same topic
        for i in range(3):
            pub.publish_sync(EPISODES, f"other/{i}", episode(f"ep:other/{i}", run_id="other"))
    try:
        # epochs of two tasks: the second epoch's groups are new (t0@e2), not late; the
        # third never runs, as on_update stops training after the second batch
        tasks = [Task(task_id=f"t{i}", instruction=f"abc {i}") for i in range(2)]
        trainer = rllm.AgentTrainer(
            rollout=completer,
            evaluator=by_index,
            train_dataset=tasks,
            kafka=kafka,
            config=short_run_config(
                RUN, gateway.url, "loop-admin-key", tiny_model, tmp_path, tokens=4
            ),
        )
        seen: list[int] = []

        def on_update(record: UpdateRecord) -> bool:
            seen.append(record.version)
            return record.version < 2

        report = trainer.train(on_update=on_update)
        assert seen == [1, 2]
        assert [u.version for u in report.updates] == [1, 2], report
        # each batch's rollouts carry the version they ran on, as their steps (and analytics) do
        assert [u.rollout_version for u in report.updates] == [0, 1], report
        assert all(u.prompt_tokens > 0 and u.completion_tokens > 0 for u in report.updates)
        assert [u.rollouts for u in report.updates] == [4, 4]
        assert [u.reward_mean for u in report.updates] == [0.5, 0.5]
        assert report.version == 2

        deadline = time.monotonic() + 30
        while engine.version < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.version == 2, follower.errors
        models = httpx.get(f"{server.url}/v1/models", timeout=5).json()
        assert '"policy_version": 2' in json.dumps(models), models

        codec = AvroCodec()
        episodes = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(EPISODES))]
        ours = sorted({e.task.task_id for e in episodes if e.run_id == RUN})
        assert ours == ["t0", "t0@e2", "t1", "t1@e2"]
        # the run's estimator travelled with its tasks, and the processors used it
        mine = [e for e in episodes if e.run_id == RUN]
        assert [run_estimator(e.task.metadata_json) for e in mine] == ["grpo"] * 4
        assert [e.estimator for e in mine] == ["grpo"] * 4
        records = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
        updates = [r for r in records if isinstance(r, PolicyUpdated)]
        assert [u.version for u in updates] == [0, 1, 2]  # 0: the run's base weights
        # the gateway acknowledged each version once the model server had reloaded it, on
        # the same topic, after the update it acknowledges: what the sync wait followed
        served = [r for r in records if isinstance(r, PolicyServed) and r.run_id == RUN]
        assert [(s.version, s.upstream_reports) for s in served] == [
            (0, True),
            (1, True),
            (2, True),
        ]
        assert len({s.gateway_id for s in served}) == 1
        order = [(type(r).__name__, r.version) for r in records if r.run_id == RUN]
        assert all(
            order.index(("PolicyUpdated", v)) < order.index(("PolicyServed", v)) for v in range(3)
        )
        state = json.loads((tmp_path / "ckpt" / RUN / "v000002" / "state.json").read_text())
        trained = [i for h in state["history"] for i in h["episode_ids"]]
        assert sorted(trained) == [f"ep:{RUN}/{t}" for t in ("t0", "t0@e2", "t1", "t1@e2")], (
            "only this run's, each epoch's own"
        )
        steps = [
            codec.decode(m.value()).payload for m in read_all(kafka, kafka.topic(SESSION_EVENTS))
        ]
        dispatch = sorted(s.policy_version for s in steps if type(s).__name__ == "StepCaptured")
        assert dispatch == [0, 0, 0, 0, 1, 1, 1, 1], "sync mode: batch 2 ran on version 1"
    finally:
        stack.close()
