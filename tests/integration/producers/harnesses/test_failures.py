"""How harness runs fail: an agent that does nothing gets 0; one that exits non-zero closes
with ``agent_error``; a verifier that writes no reward closes with ``verifier_error`` and
publishes no reward (never a silent 0); a task whose environment does not build closes
with ``sandbox_error``; the other tasks of the run go on, and no sandbox is left."""

from __future__ import annotations

import shutil
from pathlib import Path

from rllm.benchmarks.harbor import load_task, to_task
from rllm.producers.evaluation import run_tasks
from rllm.producers.harnesses.bash import BashHarness
from rllm.schemas.types import RewardAssigned, SessionClosed, SessionStatus
from tests.fakes.scripted import ScriptedUpstream
from tests.integration.producers.harnesses.helpers import (
    Events,
    Stage,
    needs_local_sandbox,
    session_payloads,
)
from tests.paths import HARBOR_TASKS as TASKS

pytestmark = needs_local_sandbox


def _copy(tmp_path: Path, name: str) -> Path:
    """A copy of hello-file called ``name`` to break."""
    target = tmp_path / "tasks" / name
    shutil.copytree(TASKS / "hello-file", target)
    return target


async def test_failures_are_named_and_the_other_tasks_go_on(
    stage: Stage, upstream: ScriptedUpstream, session_events: Events, tmp_path: Path
) -> None:
    upstream.script[:] = ["run: true", "done"]  # does nothing useful, then says done
    no_reward = _copy(tmp_path, "no-reward")
    (no_reward / "tests" / "test.sh").write_text("#!/bin/bash\necho 'no reward written'\n")
    no_build = _copy(tmp_path, "no-build")
    (no_build / "environment" / "Dockerfile").write_text("FROM debian:bookworm\nRUN exit 3\n")
    tasks = [to_task(load_task(p), "broken") for p in (TASKS / "hello-file", no_reward, no_build)]
    results = await run_tasks(
        tasks, stage.rollout("bash"), stage.client, run_id="run-fail", model="m", concurrency=1
    )
    upstream.script[:] = ["thinking..."]  # never a command, never done: out of turns
    stuck = stage.rollout(BashHarness(max_turns=2))
    gave_up = await stuck.run(tasks[0], stage.client, run_id="run-fail", model="m")
    by_task = {o.task.task_id: o for o, _ in results}

    nothing = by_task["hello-file"]  # did nothing: reward 0, a clean ok run
    assert (nothing.status, nothing.output["reward"], nothing.num_steps) == (
        SessionStatus.OK,
        0.0,
        2,
    )
    assert [
        p.reward
        for p in session_payloads(session_events, nothing.session_id)
        if isinstance(p, RewardAssigned)
    ] == [0.0]

    bad = by_task["no-reward"]
    assert bad.status is SessionStatus.ERROR and bad.error is not None
    assert bad.error.startswith("verifier_error: ") and "reward" in bad.error
    assert bad.output["reason"] == "verifier_error" and bad.output["reward"] is None
    bad_payloads = session_payloads(session_events, bad.session_id)
    assert not any(isinstance(p, RewardAssigned) for p in bad_payloads)

    unbuilt = by_task["no-build"]
    assert unbuilt.status is SessionStatus.ERROR and unbuilt.error is not None
    assert unbuilt.error.startswith("sandbox_error: ") and "'no-build'" in unbuilt.error
    assert unbuilt.num_steps == 0

    assert gave_up.status is SessionStatus.ERROR and gave_up.error is not None
    assert gave_up.error.startswith("agent_error: ") and "exited 2" in gave_up.error
    assert gave_up.num_steps == 2 and gave_up.output["reward"] == 0.0
    closed = session_payloads(session_events, gave_up.session_id)[-1]
    assert isinstance(closed, SessionClosed) and closed.status is SessionStatus.ERROR
    assert await stage.alive() == []
