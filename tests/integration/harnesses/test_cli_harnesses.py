"""Third-party CLI harnesses end to end: the real CLI, installed on the host from its
registry (cached in ``$RLLM_HARNESS_HOME``), bound into a real local sandbox with
``network=gateway``, solves ``hello-file`` against the scripted model through a real
gateway; a recording proxy in front of the gateway keeps the exact requests it sent.

Each test prints the figures the README reports: install seconds (cold or cached), the
rollout's seconds, the first model call's seconds after the start, and every request.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from rllm.benchmarks.harbor import load_task, to_task
from rllm.producers.harnesses import VERIFIER_EVALUATOR, HarnessRollout, get_harness
from rllm.producers.harnesses.host import harnesses_home
from rllm.producers.sdk import GatewayClient
from rllm.sandboxes import OWNER_LABEL, SandboxBackend
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
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import (
    CLAUDE_SOLVE,
    CODEX_SOLVE,
    MINI_SOLVE,
    OPENCODE_SOLVE,
    hello_file,
)

Events = Callable[[], list[tuple[str, SessionEvent]]]

pytestmark = needs_local_sandbox


async def _solve(
    name: str,
    script: list[str],
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> tuple[list[RecordedRequest], dict[str, object]]:
    """Run ``name`` once on hello-file; check the run, its steps and its reward on the
    broker; return the requests it sent and the run's output."""
    upstream.script[:] = script
    harness = get_harness(name)
    home = harnesses_home()
    cached = harness.is_installed(home)
    began = time.perf_counter()
    await harness.install(home)
    install_s = time.perf_counter() - began
    assert harness.is_installed(home)
    proxy = RecordingProxy(start_gateway().url)
    owner = f"cli-{uuid.uuid4().hex[:8]}"
    rollout = HarnessRollout(harness, backend, artifacts_dir=tmp_path / "artifacts",
                             labels={OWNER_LABEL: owner})  # fmt: skip
    task = to_task(load_task(hello_file(name, tmp_path)), "harbor-fixtures")
    client = GatewayClient(proxy.url)
    try:
        began = time.perf_counter()
        outcome = await rollout.run(task, client, run_id=f"run-{name}", model="scripted")
        rollout_s = time.perf_counter() - began
    finally:
        await client.aclose()
        proxy.stop()
    out = outcome.output
    assert isinstance(out, dict)
    calls = [r for r in proxy.requests if "/v1/" in r.path]
    first_s = calls[0].arrived - began if calls else float("nan")
    print(f"\n{name} {harness.version}: install {install_s:.1f} s "
          f"({'cached' if cached else 'cold'}); rollout {rollout_s:.2f} s (agent "
          f"{out['agent_s']:.2f} s, sandbox {out['sandbox_s']:.2f} s); first model call "
          f"{first_s:.2f} s after start; {len(calls)} model calls")  # fmt: skip
    for request in proxy.requests:
        print(f"  {request.line()}  headers={request.headers}")
    for body in upstream.requests:  # what the gateway made of them for the chat upstream
        print(f"  upstream got: fields={sorted(body)} max_tokens={body.get('max_tokens')}")
    assert (outcome.status, outcome.error) == (SessionStatus.OK, None), out["agent_output_tail"]
    assert out["reward"] == 1.0 and out["reason"] == "ok", out["agent_output_tail"]

    payloads = [e.payload for k, e in session_events() if k == outcome.session_id]
    kinds = [type(p).__name__ for p in payloads]
    assert kinds == ["SessionOpened", *["StepCaptured"] * len(script), "RewardAssigned",
                     "SessionClosed"], kinds  # fmt: skip
    steps = [p for p in payloads if isinstance(p, StepCaptured)]
    assert [s.step_index for s in steps] == list(range(len(script)))
    for step, line in zip(steps, script, strict=True):  # the upstream's sampled ids
        assert unpack_tokens(step.response_token_ids).tolist() == tokenize(_parse(line, 0)[0])
    reward, closed = payloads[-2], payloads[-1]
    assert isinstance(reward, RewardAssigned) and isinstance(closed, SessionClosed)
    assert (reward.reward, reward.evaluator) == (1.0, VERIFIER_EVALUATOR)
    assert (closed.status, closed.num_steps) == (SessionStatus.OK, len(script))
    assert len(upstream.requests) == len(script) == outcome.num_steps
    assert [s.id for s in await backend.sandboxes({OWNER_LABEL: owner}) if s.alive] == []
    return calls, out


async def test_mini_swe_agent_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("mini-swe-agent", MINI_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert first["model"] == "scripted" and [m["role"] for m in first["messages"]] == [
        "system", "user"]  # fmt: skip
    assert "Hello, Harbor!" in first["messages"][1]["content"]
    second = (calls[1].body or {})["messages"]
    assert second[2]["content"] == MINI_SOLVE[0] and "<returncode>0</returncode>" in str(
        second[3]["content"])  # fmt: skip
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/mini-swe-agent.traj.json"]).is_file()


async def test_claude_code_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("claude-code", CLAUDE_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [("POST", "messages")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted"
    assert any(t.get("name") == "Write" for t in first["tools"])
    # the tool_use the gateway made of the chat tool call came back as a tool_result
    last = (calls[1].body or {})["messages"]
    assert [b["type"] for b in last[-1]["content"] if isinstance(b, dict)][:1] == ["tool_result"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/claude-code.jsonl"]).is_file()


async def test_codex_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("codex", CODEX_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [("POST", "responses")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted" and first["stream"] is True
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/codex.jsonl"]).is_file()


async def test_opencode_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("opencode", OPENCODE_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert first["model"] == "scripted"
    assert any((t.get("function") or {}).get("name") == "write" for t in first["tools"])
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/opencode.jsonl"]).is_file()
