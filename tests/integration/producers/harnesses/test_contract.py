"""The contract every registered harness passes: it is a ``Harness``, its install script is
idempotent, and with the scripted model it solves ``hello-file`` twice at once in a real
sandbox with ``network=gateway`` (reward 1, its steps and their token ids on the broker),
installing once for both. A third-party CLI is the real one, installed on the host from
its registry (cached in ``$RLLM_HARNESS_HOME``); a recording proxy in front of the gateway
keeps the exact requests it sent, which its own checks (``checks.CLI_CHECKS``: paths, tools,
model name, artifacts) assert on.

Each run prints the figures the README reports: install seconds (cold or cached), the
rollout's seconds, the first model call's seconds after the start, and every request.

A new harness joins by adding its solving script to ``SOLVE`` (and a CLI its checks); one
without fails here."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

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
from rllm.producers.harnesses.host import harnesses_home, install, is_installed
from rllm.producers.harnesses.registry import harness_names
from rllm.producers.sdk import GatewayClient
from rllm.sandboxes import OWNER_LABEL, SandboxBackend, SandboxSpec
from rllm.schemas.tokens import unpack_tokens
from rllm.schemas.types import (
    RewardAssigned,
    SessionClosed,
    SessionEvent,
    SessionStatus,
    StepCaptured,
)
from tests.fakes.recorder import RecordedRequest, RecordingProxy
from tests.fakes.scripted import ScriptedUpstream, _parse
from tests.fakes.upstream import ThreadedServer, tokenize
from tests.integration.producers.harnesses.checks import CLI_CHECKS
from tests.integration.producers.harnesses.helpers import (
    HELLO_SCRIPT,
    alive,
    needs_local_sandbox,
)
from tests.integration.producers.harnesses.scripts import CLI_SOLVE, hello_file
from tests.paths import HARBOR_TASKS as TASKS

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
    assert sorted(CLI_CHECKS) == sorted(CLI_SOLVE)  # every third-party CLI has its checks
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


def _session_calls(proxy: RecordingProxy, session_id: str) -> list[RecordedRequest]:
    """The model calls of one session, as the proxy saw them, in arrival order."""
    prefix = f"/sessions/{quote(session_id, safe='/:')}/v1/"
    return [r for r in proxy.requests if r.path.startswith(prefix)]


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
    script = SOLVE[name]
    upstream.script[:] = script or ["unused"]
    harness = get_harness(name)
    home = harnesses_home()
    cached = is_installed(harness, home)
    began = time.perf_counter()
    await install(harness, home)
    install_s = time.perf_counter() - began
    assert is_installed(harness, home)
    proxy = RecordingProxy(start_gateway().url)
    owner = f"contract-{uuid.uuid4().hex[:8]}"
    rollout = HarnessRollout(
        harness, backend, artifacts_dir=tmp_path / "artifacts", labels={OWNER_LABEL: owner}
    )
    task = to_task(load_task(hello_file(name, tmp_path)), "harbor-fixtures")
    client = GatewayClient(proxy.url)
    try:
        began = time.perf_counter()
        results = await run_tasks(
            [task],
            rollout,
            client,
            run_id=f"run-{name}",
            model="scripted",
            attempts=2,
            concurrency=2,
            evaluator=verifier_evaluator,
        )
        rollout_s = time.perf_counter() - began
    finally:
        await client.aclose()
        proxy.stop()
    calls = 0 if harness.api is HarnessApi.NONE else len(script)
    print(
        f"\n{name} {harness.version}: install {install_s:.1f} s "
        f"({'cached' if cached else 'cold'}); 2 rollouts at once {rollout_s:.2f} s"
    )
    for outcome, _ in results:
        out = outcome.output
        sent = _session_calls(proxy, outcome.session_id)
        first_s = sent[0].arrived - began if sent else float("nan")
        print(
            f"  agent {out['agent_s']:.2f} s, sandbox {out['sandbox_s']:.2f} s; first model "
            f"call {first_s:.2f} s after start; {len(sent)} model calls"
        )
    for request in proxy.requests:
        print(f"  {request.line()}  headers={request.headers}")
    for body in upstream.requests:  # what the gateway made of them for the chat upstream
        print(f"  upstream got: fields={sorted(body)} max_tokens={body.get('max_tokens')}")

    for outcome, reward in results:
        out = outcome.output
        assert (outcome.status, outcome.error) == (SessionStatus.OK, None), out
        assert out["reward"] == 1.0 and out["reason"] == "ok", out["agent_output_tail"]
        assert outcome.num_steps == calls
        assert reward is not None and (reward.reward, reward.signals) == (1.0, {"reward": 1.0})
        payloads = [e.payload for k, e in session_events() if k == outcome.session_id]
        kinds = [type(p).__name__ for p in payloads]
        assert kinds == [
            "SessionOpened",
            *["StepCaptured"] * calls,
            "RewardAssigned",
            "SessionClosed",
        ], kinds
        steps = [p for p in payloads if isinstance(p, StepCaptured)]
        assert [s.step_index for s in steps] == list(range(calls))
        for step, line in zip(steps, script, strict=True):  # the upstream's sampled ids
            assert unpack_tokens(step.response_token_ids).tolist() == tokenize(_parse(line, 0)[0])
        assigned, closed = payloads[-2], payloads[-1]
        assert isinstance(assigned, RewardAssigned) and isinstance(closed, SessionClosed)
        assert (assigned.reward, assigned.evaluator) == (1.0, VERIFIER_EVALUATOR)
        assert (closed.status, closed.num_steps) == (SessionStatus.OK, calls)
        check = CLI_CHECKS.get(name)
        if check is not None:
            check(_session_calls(proxy, outcome.session_id), out["artifacts"])
    assert len(upstream.requests) == 2 * calls
    snapshots = [s for s in await backend.snapshots.all() if s.name.startswith(f"harness-{name}")]
    assert len(snapshots) == (1 if harness.install_script() else 0)  # installed once for both
    assert await alive(backend, owner) == []


@needs_local_sandbox
def test_a_harness_rollout_is_what_agent_trainer_trains(tmp_path: Path) -> None:
    from rllm.app import AgentTrainer
    from rllm.sandboxes import SandboxSettings, get_backend

    backend = get_backend("local", SandboxSettings(home=tmp_path))
    rollout = HarnessRollout(get_harness("bash"), backend)
    rows = [to_task(load_task(TASKS / "hello-file"), "harbor-fixtures")]
    trainer = AgentTrainer(rollout, evaluator=verifier_evaluator, train_dataset=rows)
    assert trainer.rollout is rollout and rollout.name == "harness:bash"
