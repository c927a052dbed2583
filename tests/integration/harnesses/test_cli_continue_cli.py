"""continue end to end: the real ``cn`` (npm, on the pinned Node), configured fully local
(no Continue account), in a real local sandbox writes ``/app/hello.txt`` with its
``Write`` tool against the scripted model through a real gateway; the verifier gives 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from rllm.schemas.types import SessionEvent
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import CONTINUE_SOLVE
from tests.integration.harnesses.test_cli_harnesses import _solve

pytestmark = needs_local_sandbox


async def test_continue_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Callable[[], list[tuple[str, SessionEvent]]],
    tmp_path: Path,
) -> None:
    calls, out = await _solve("continue", CONTINUE_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert first["model"] == "scripted" and first["stream"] is True
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {"Read", "Write", "Edit", "Bash"} <= set(tools), sorted(tools)
    assert sorted(tools["Write"]["parameters"]["properties"]) == ["content", "filepath"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in json.dumps(first["messages"][1]["content"])
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/continue.log"]).read_text().strip().endswith(
        "I wrote /app/hello.txt.")  # fmt: skip
    session = json.loads(Path(artifacts["/logs/agent/continue-session.json"]).read_text())
    assert "Write" in json.dumps(session)
