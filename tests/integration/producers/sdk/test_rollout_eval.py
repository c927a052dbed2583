"""@rollout / @evaluator and the eval runner through a real gateway and the real broker."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import rllm
from rllm.errors import ConfigError
from rllm.producers.evaluation import EvalConfig, run_eval, run_tasks
from rllm.producers.evaluation.summary import summarize
from rllm.producers.sdk import GatewayClient, RolloutConfig, RolloutOutcome
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionStatus, StepCaptured, Task
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import read_all
from tests.paths import BENCHMARK_FIXTURES as FIXTURES
from tests.unit.producers.sdk.agents import counting_agent


def _events_by_session(kafka: KafkaSettings) -> dict[str, list[Any]]:
    codec = AvroCodec()
    out: dict[str, list[Any]] = defaultdict(list)
    for msg in read_all(kafka, kafka.topic(SESSION_EVENTS)):
        ev = codec.decode(msg.value())
        assert msg.key().decode() == ev.session_id
        out[ev.session_id].append(ev)
    return out


@rllm.rollout
def openai_agent(task: Task, config: RolloutConfig) -> str:
    client = config.openai_client()
    reply = client.chat.completions.create(
        model=config.model,
        messages=[{"role": "user", "content": task.instruction}],
        **config.sampling,
    )
    if "fail" in task.instruction:
        raise RuntimeError("the agent gave up")
    return str(reply.choices[0].message.content)


@rllm.evaluator
def starts_with_ok(task: Task, outcome: RolloutOutcome) -> tuple[float, bool]:
    ok = (outcome.answer or "").startswith("ok:")
    return (1.0 if ok else 0.0), ok


async def test_rollouts_and_rewards_form_whole_sessions_on_the_broker(
    gateway: ThreadedServer, kafka: KafkaSettings
) -> None:
    tasks = [Task(task_id="t1", instruction="say hi"), Task(task_id="t2", instruction="fail now")]
    client = GatewayClient(gateway.url)
    try:
        results = await run_tasks(
            tasks,
            openai_agent,
            client,
            run_id="run-sdk",
            model="m",
            attempts=2,
            concurrency=3,
            sampling={"max_tokens": 8},
            evaluator=starts_with_ok,
        )
    finally:
        await client.aclose()
    assert len(results) == 4
    by_task = defaultdict(list)
    for outcome, reward in results:
        by_task[outcome.task.task_id].append((outcome, reward))
    assert sorted(o.rollout_index for o, _ in by_task["t1"]) == [0, 1]
    for outcome, reward in by_task["t1"]:
        assert outcome.status is SessionStatus.OK and outcome.num_steps == 1
        assert outcome.answer is not None and outcome.answer.startswith("ok:")
        assert reward is not None and reward.is_correct is True
    for outcome, _ in by_task["t2"]:
        assert outcome.status is SessionStatus.ERROR
        assert outcome.error == "RuntimeError: the agent gave up"

    sessions = _events_by_session(kafka)
    assert len(sessions) == 4
    for sid, events in sessions.items():
        kinds = [type(e.payload).__name__ for e in events]
        # the reward is published before the close, so the processors never see it late
        assert kinds == ["SessionOpened", "StepCaptured", "RewardAssigned", "SessionClosed"], sid
        opened, step, reward_ev, closed = (e.payload for e in events)
        assert opened.group_size == 2 and opened.agent == "openai_agent"
        assert {e.run_id for e in events} == {"run-sdk"}
        assert len(step.response_ids) > 0 and closed.num_steps == 1
        assert reward_ev.evaluator == "starts_with_ok"
        if opened.task.task_id == "t2":
            assert closed.status is SessionStatus.ERROR
            assert closed.error == "RuntimeError: the agent gave up"
        else:
            assert closed.status is SessionStatus.OK
            assert json.loads(closed.output_json or "null").startswith("ok:")
    # the agent reports no usage (it returns a string): the summary counts the gateway's
    steps = [e.payload for evs in sessions.values() for e in evs]
    usage = [s.usage for s in steps if isinstance(s, StepCaptured)]
    summary = summarize("run-sdk", "tasks", "m", results, attempts=2, seconds=1.0)
    assert len(usage) == 4
    assert summary.prompt_tokens == sum(u.prompt_tokens for u in usage) > 0
    assert summary.completion_tokens == sum(u.completion_tokens for u in usage) > 0


async def test_run_eval_on_a_benchmark_fixture_scores_writes_and_summarises(
    gateway: ThreadedServer, kafka: KafkaSettings, tmp_path: Path
) -> None:
    seen: list[str] = []
    config = EvalConfig(
        benchmark="gsm8k",
        gateway_url=gateway.url,
        model="fake-model",
        attempts=2,
        concurrency=2,
        data_file=FIXTURES / "gsm8k.parquet",
        output=tmp_path / "out.jsonl",
        sampling={"max_tokens": 16},
    )
    summary = await run_eval(config, progress=lambda o, r: seen.append(o.session_id))
    assert summary.tasks == 2 and summary.attempts == 2
    assert summary.accuracy == 0.0  # the fake upstream only echoes; math grading says wrong
    assert summary.errors == 0 and summary.steps == 4
    assert set(summary.pass_at) == {1, 2}
    assert (summary.policy_version, summary.policy_run) == (0, None)
    assert len(seen) == 4
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["run_id"] for r in rows} == {config.run_id}
    assert all(r["reward"]["is_correct"] is False for r in rows)
    sessions = _events_by_session(kafka)
    assert len(sessions) == 4
    assert all(
        [type(e.payload).__name__ for e in evs][-2:] == ["RewardAssigned", "SessionClosed"]
        for evs in sessions.values()
    )


async def test_run_eval_refuses_a_model_the_gateways_upstream_does_not_serve(
    gateway: ThreadedServer, kafka: KafkaSettings
) -> None:
    """``eval -m PROFILE`` with the stack's upstream serving another model: refused before
    any session, instead of a result filed under the wrong model."""
    config = EvalConfig(
        benchmark="gsm8k",
        gateway_url=gateway.url,
        model="HuggingFaceTB/SmolLM2-135M-Instruct",
        data_file=FIXTURES / "gsm8k.parquet",
    )
    with pytest.raises(ConfigError, match=r"upstream lists fake-model") as info:
        await run_eval(config)
    assert "'HuggingFaceTB/SmolLM2-135M-Instruct' is not what the gateway" in str(info.value)
    assert _events_by_session(kafka) == {}, "no session was opened"


async def test_the_eval_summary_names_the_policy_version_it_evaluated(
    gateway: ThreadedServer, kafka: KafkaSettings
) -> None:
    """The gateway stamps version 7 of run r (as after training): the summary says so, and
    so does every step the history keeps."""
    import httpx

    from tests.integration.producers.gateway.fixtures import ADMIN

    async with httpx.AsyncClient(base_url=gateway.url, headers=ADMIN) as http:
        r = await http.post("/admin/policy", json={"version": 7, "run_id": "r"})
        assert r.status_code == 200, r.text
    config = EvalConfig(
        benchmark="gsm8k",
        gateway_url=gateway.url,
        model="fake-model",
        data_file=FIXTURES / "gsm8k.parquet",
        sampling={"max_tokens": 8},
    )
    summary = await run_eval(config)
    assert (summary.policy_version, summary.policy_run) == (7, "r")
    steps = [
        e.payload
        for evs in _events_by_session(kafka).values()
        for e in evs
        if type(e.payload).__name__ == "StepCaptured"
    ]
    assert len(steps) == summary.steps == 2
    assert {s.policy_version for s in steps} == {7}


def test_agent_trainer_refuses_a_model_the_gateways_upstream_does_not_serve(
    gateway: ThreadedServer, kafka: KafkaSettings
) -> None:
    """``AgentTrainer.evaluate()`` and ``train()`` ask the gateway first: rollouts of
    SmolLM2 through an upstream serving fake-model are refused before any session (and
    before the trainer loads a model), naming both."""
    calls: list[str] = []
    counted = counting_agent(calls)
    trainer = rllm.AgentTrainer(
        counted,
        train_dataset=[Task(task_id="t")],
        val_dataset=[Task(task_id="v")],
        config={"gateway_url": gateway.url, "model": "HuggingFaceTB/SmolLM2-135M-Instruct"},
        kafka=kafka,
    )
    for run in (trainer.evaluate, trainer.train):
        with pytest.raises(ConfigError, match=r"upstream lists fake-model") as info:
            run()
        assert "'HuggingFaceTB/SmolLM2-135M-Instruct' is not what the gateway" in str(info.value)
    assert calls == [] and _events_by_session(kafka) == {}, "no rollout, no session"
