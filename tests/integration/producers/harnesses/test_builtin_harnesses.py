"""The built-in harnesses end to end: a real local sandbox with ``network=gateway``, a real
gateway in front of a scripted model, the real broker, the shipped Harbor tasks."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pytest

from rllm.benchmarks.harbor import load_dataset, load_task, to_task
from rllm.producers.evaluation import run_tasks
from rllm.producers.harnesses import (
    VERIFIER_EVALUATOR,
    CloseReason,
    UnknownHarnessError,
    get_harness,
    harness_names,
)
from rllm.schemas.tokens import unpack_tokens
from rllm.schemas.types import (
    RewardAssigned,
    SessionClosed,
    SessionOpened,
    SessionStatus,
    StepCaptured,
)
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import chat_prompt_text, tokenize
from tests.integration.producers.harnesses.helpers import (
    HELLO_SCRIPT,
    Events,
    Stage,
    needs_local_sandbox,
    session_payloads,
)
from tests.paths import HARBOR_TASKS as TASKS


def test_an_unknown_harness_name_is_a_clear_error() -> None:
    with pytest.raises(UnknownHarnessError) as caught:
        get_harness("claude-codex")
    message = str(caught.value)
    assert "'claude-codex'" in message
    assert "bash" in message and "oracle" in message
    assert {"bash", "oracle"} <= set(harness_names())
    assert isinstance(caught.value, ValueError)


@needs_local_sandbox
async def test_bash_solves_hello_file_end_to_end(
    stage: Stage, upstream: ScriptedUpstream, session_events: Events, tmp_path: Path
) -> None:
    rollout = stage.rollout("bash", artifacts_dir=tmp_path / "artifacts")
    task = to_task(load_task(TASKS / "hello-file"), "harbor-fixtures")
    began = time.perf_counter()
    outcome = await rollout.run(task, stage.client, run_id="run-bash", model="scripted")
    whole_s = time.perf_counter() - began
    first_call_s = upstream.arrivals[0] - began
    again = time.perf_counter()  # the snapshot is reused: no second install
    second = await rollout.run(task, stage.client, run_id="run-bash", model="scripted")
    second_s = time.perf_counter() - again
    out, out2 = outcome.output, second.output
    print(
        f"bash on hello-file: first model call {first_call_s:.2f} s after start; rollout "
        f"{whole_s:.2f} s cold (agent {out['agent_s']:.2f} s, sandbox {out['sandbox_s']:.2f} s),"
        f" {second_s:.2f} s warm (agent {out2['agent_s']:.2f} s, sandbox "
        f"{out2['sandbox_s']:.2f} s)"
    )

    assert (outcome.status, outcome.error, outcome.num_steps) == (SessionStatus.OK, None, 2)
    assert outcome.output["reason"] == "ok" and outcome.output["reward"] == 1.0
    assert (second.status, second.num_steps, second.output["reward"]) == (SessionStatus.OK, 2, 1.0)
    snapshots = await stage.backend.snapshots.all()
    assert len([s for s in snapshots if s.name.startswith("harness-bash")]) == 1
    assert await stage.alive() == []

    # what the agent sent: the instruction, then its command's result; two calls a run
    assert len(upstream.requests) == 4
    first, last = upstream.requests[0]["messages"], upstream.requests[1]["messages"]
    assert "Hello, Harbor!" in first[1]["content"] and len(first) == 2
    assert last[2]["content"] == HELLO_SCRIPT[0] and last[3]["content"].startswith("exit code 0")

    payloads = session_payloads(session_events, outcome.session_id)
    kinds = [type(p).__name__ for p in payloads]
    assert kinds == [
        "SessionOpened",
        "StepCaptured",
        "StepCaptured",
        "RewardAssigned",
        "SessionClosed",
    ]
    opened, step0, step1, reward, closed = payloads
    assert isinstance(opened, SessionOpened) and opened.agent == "harness:bash"
    assert isinstance(step0, StepCaptured) and isinstance(step1, StepCaptured)
    assert (step0.step_index, step1.step_index) == (0, 1)
    assert unpack_tokens(step0.prompt_token_ids).tolist() == tokenize(chat_prompt_text(first))
    assert unpack_tokens(step0.response_token_ids).tolist() == tokenize(HELLO_SCRIPT[0])
    assert unpack_tokens(step1.response_token_ids).tolist() == tokenize("done")
    assert isinstance(reward, RewardAssigned)
    assert (reward.reward, reward.is_correct, reward.signals) == (1.0, True, {"reward": 1.0})
    assert reward.evaluator == VERIFIER_EVALUATOR
    assert isinstance(closed, SessionClosed)
    assert (closed.status, closed.num_steps, closed.error) == (SessionStatus.OK, 2, None)
    assert json.loads(closed.output_json or "{}")["reason"] == "ok"

    # the harness's own log is an artifact (not training data): the command it ran
    log = Path(outcome.output["artifacts"]["/logs/agent/bash-agent.jsonl"])
    turns = [json.loads(line) for line in log.read_text().splitlines()]
    assert [t["results"][0]["kind"] for t in turns] == ["run", "done"]
    assert turns[0]["results"][0]["command"] == "printf 'Hello, Harbor!\\n' > /app/hello.txt"


@needs_local_sandbox
async def test_oracle_solves_every_shipped_task_without_a_model_call(
    stage: Stage, upstream: ScriptedUpstream, session_events: Events
) -> None:
    dataset = load_dataset(TASKS)
    assert len(dataset.tasks) == 10 and not dataset.errors
    began = time.perf_counter()
    results = await run_tasks(
        dataset.rows(),
        stage.rollout("oracle"),
        stage.client,
        run_id="run-oracle",
        model="none",
        concurrency=2,
    )
    print(f"oracle on {len(results)} tasks: {time.perf_counter() - began:.2f} s")
    by_task = {o.task.task_id: o for o, _ in results}
    assert sorted(by_task) == sorted(t.name for t in dataset.tasks)
    for name, outcome in by_task.items():
        assert (outcome.status, outcome.error) == (SessionStatus.OK, None), (name, outcome.output)
        assert outcome.output["reward"] == 1.0 and outcome.num_steps == 0, name
        rewards = [
            p
            for p in session_payloads(session_events, outcome.session_id)
            if isinstance(p, RewardAssigned)
        ]
        assert [r.reward for r in rewards] == [1.0], name
    assert upstream.requests == []
    assert await stage.alive() == []


@needs_local_sandbox
async def test_a_hung_agent_is_killed_at_its_timeout(
    stage: Stage, upstream: ScriptedUpstream, session_events: Events
) -> None:
    upstream.script[:] = ["run: sleep 600"]
    hello = load_task(TASKS / "hello-file")
    task = to_task(dataclasses.replace(hello, agent_timeout_s=4.0), "harbor-fixtures")
    outcome = await stage.rollout("bash").run(
        task, stage.client, run_id="run-hang", model="scripted"
    )
    assert outcome.status is SessionStatus.TIMEOUT
    assert outcome.error is not None and outcome.error.startswith("timeout: ")
    assert "ran past 4 s" in outcome.error and "hello-file" in outcome.error
    assert outcome.output["reason"] == CloseReason.TIMEOUT.value
    assert 4.0 <= outcome.output["agent_s"] < 8.0
    assert outcome.num_steps == 1 and len(upstream.requests) == 1
    payloads = session_payloads(session_events, outcome.session_id)
    closed = payloads[-1]
    assert isinstance(closed, SessionClosed) and closed.status is SessionStatus.TIMEOUT
    rewards = [p for p in payloads if isinstance(p, RewardAssigned)]
    assert [r.reward for r in rewards] == [0.0]  # verified anyway: nothing was written
    assert await stage.alive() == []


@needs_local_sandbox
async def test_bash_runs_as_the_tasks_non_root_agent_user(
    stage: Stage, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    upstream.script[:] = ["run: id -un && printf 'Hello, Harbor!\\n' > hello.txt", "done"]
    folder = tmp_path / "hello-nobody"
    shutil.copytree(TASKS / "hello-file", folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml.replace("[agent]\n", '[agent]\nuser = "nobody"\n'))
    (folder / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm\nWORKDIR /app\nRUN chmod 777 /app\n"
    )
    rollout = stage.rollout("bash", artifacts_dir=tmp_path / "artifacts")
    outcome = await rollout.run(to_task(load_task(folder)), stage.client, run_id="r", model="m")
    assert (outcome.status, outcome.error) == (SessionStatus.OK, None), outcome.output
    assert outcome.output["reward"] == 1.0 and outcome.num_steps == 2
    log = Path(outcome.output["artifacts"]["/logs/agent/bash-agent.jsonl"])
    assert log.is_file()  # the loop, run as nobody, wrote its log
    observation = json.loads(log.read_text().splitlines()[0])["results"][0]["observation"]
    assert observation == "exit code 0\nnobody\n"  # its command ran as the task's user
