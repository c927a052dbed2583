"""The contract every registered harness passes: it is a ``Harness``, its install script is
idempotent, and with the scripted model it solves ``hello-file`` in a real sandbox with
``network=gateway`` (reward 1, its steps on the broker), installing once for many runs.

A new harness joins by adding its solving script to ``SOLVE``; one without fails here."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from rllm.benchmarks.harbor import load_task, to_task
from rllm.producers.evaluation import run_tasks
from rllm.producers.harnesses import (
    VERIFIER_EVALUATOR,
    Harness,
    HarnessApi,
    HarnessRollout,
    get_harness,
    verifier_evaluator,
)
from rllm.producers.harnesses.registry import harness_names
from rllm.producers.sdk import GatewayClient
from rllm.sandboxes import OWNER_LABEL, SandboxBackend, SandboxSpec
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus, StepCaptured
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import HELLO_SCRIPT, needs_local_sandbox
from tests.integration.harnesses.scripts import CLI_SOLVE, hello_file

TASKS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor_tasks"

SOLVE: dict[str, list[str]] = {
    "oracle": [],
    "bash": HELLO_SCRIPT,
    "react": [
        'tool:edit {"path": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
        'tool:bash {"command": "cat /app/hello.txt"}',
        'tool:submit {"answer": "done"}',
    ],
    **CLI_SOLVE,
}
"""Each harness's scripted model answers that solve hello-file."""


def test_every_registered_harness_is_in_the_suite() -> None:
    assert sorted(SOLVE) == harness_names()
    for name in harness_names():
        harness = get_harness(name)
        assert isinstance(harness, Harness) and harness.name == name and harness.version


@needs_local_sandbox
@pytest.mark.parametrize("name", sorted(SOLVE))
async def test_install_script_is_idempotent(name: str, backend: SandboxBackend) -> None:
    script = get_harness(name).install_script()
    sandbox = await backend.create(SandboxSpec())
    try:
        for _ in range(2):
            done = await sandbox.exec(script or "true", timeout_s=120)
            assert done.ok, (name, done.stdout, done.stderr)
    finally:
        await sandbox.close()


@needs_local_sandbox
@pytest.mark.parametrize("name", sorted(SOLVE))
async def test_harness_solves_hello_file(
    name: str,
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Callable[[], list[tuple[str, SessionEvent]]],
    tmp_path: Path,
) -> None:
    upstream.script[:] = SOLVE[name] or ["unused"]
    gateway = start_gateway()
    owner = f"contract-{uuid.uuid4().hex[:8]}"
    harness = get_harness(name)
    rollout = HarnessRollout(harness, backend, labels={OWNER_LABEL: owner})
    task = to_task(load_task(hello_file(name, tmp_path)), "harbor-fixtures")
    client = GatewayClient(gateway.url)
    try:
        results = await run_tasks([task], rollout, client, run_id=f"run-{name}", model="m",
                                  attempts=2, concurrency=2,
                                  evaluator=verifier_evaluator)  # fmt: skip
    finally:
        await client.aclose()
    calls = 0 if harness.api is HarnessApi.NONE else len(SOLVE[name])
    for outcome, reward in results:
        assert (outcome.status, outcome.error) == (SessionStatus.OK, None), outcome.output
        assert outcome.output["reward"] == 1.0 and outcome.num_steps == calls
        assert reward is not None and (reward.reward, reward.signals) == (1.0, {"reward": 1.0})
        payloads = [e.payload for k, e in session_events() if k == outcome.session_id]
        steps = [p for p in payloads if isinstance(p, StepCaptured)]
        assert [s.step_index for s in steps] == list(range(calls))
        rewards = [p for p in payloads if isinstance(p, RewardAssigned)]
        assert [(r.reward, r.evaluator) for r in rewards] == [(1.0, VERIFIER_EVALUATOR)]
    assert len(upstream.requests) == 2 * calls
    snapshots = [s for s in await backend.snapshots.all() if s.name.startswith(f"harness-{name}")]
    assert len(snapshots) == (1 if harness.install_script() else 0)  # installed once for both
    assert [s.id for s in await backend.sandboxes({OWNER_LABEL: owner}) if s.alive] == []


@needs_local_sandbox
def test_a_harness_rollout_is_what_agent_trainer_trains(tmp_path: Path) -> None:
    from rllm.agent_trainer import AgentTrainer
    from rllm.sandboxes import SandboxSettings, get_backend

    backend = get_backend("local", SandboxSettings(home=tmp_path))
    rollout = HarnessRollout(get_harness("bash"), backend)
    rows = [to_task(load_task(TASKS / "hello-file"), "harbor-fixtures")]
    trainer = AgentTrainer(rollout, evaluator=verifier_evaluator, train_dataset=rows)
    assert trainer.rollout is rollout and rollout.name == "harness:bash"
