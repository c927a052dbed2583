"""The ``kilocode`` harness end to end: the real Kilo CLI (installed from npm on the host)
in a real local sandbox writes ``/app/hello.txt`` with its own ``write`` tool, against the
scripted model through a real gateway, and the verifier gives reward 1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import KILOCODE_SOLVE
from tests.integration.harnesses.test_cli_harnesses import Events, _solve

pytestmark = needs_local_sandbox


async def test_kilocode_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("kilocode", KILOCODE_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert (first["model"], first["stream"], first["tool_choice"]) == ("scripted", True, "auto")
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in str(first["messages"][1]["content"])
    tools = {(t.get("function") or {}).get("name") for t in first["tools"]}
    assert {"bash", "edit", "read", "write"} <= tools, sorted(tools)
    # the write tool's call and its result came back in the second request
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[2:]] == ["assistant", "tool"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "write"
    assert second[3]["content"] == "Wrote file successfully."
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    assert Path(artifacts["/logs/agent/kilocode.jsonl"]).is_file()
