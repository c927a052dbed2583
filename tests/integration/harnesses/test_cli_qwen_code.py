"""qwen-code end to end: the real CLI (npm, on the pinned Node) in a real local sandbox
writes ``/app/hello.txt`` with its ``write_file`` tool against the scripted model through
a real gateway; the verifier gives 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from rllm.schemas.types import SessionEvent
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import QWEN_SOLVE
from tests.integration.harnesses.test_cli_harnesses import _solve

pytestmark = needs_local_sandbox


async def test_qwen_code_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Callable[[], list[tuple[str, SessionEvent]]],
    tmp_path: Path,
) -> None:
    calls, out = await _solve("qwen-code", QWEN_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert first["model"] == "scripted" and first["stream"] is True
    assert calls[0].headers["user-agent"].startswith("QwenCode/0.24.4")
    tools = [(t.get("function") or {}).get("name") for t in first["tools"]]
    assert {"write_file", "edit", "read_file", "run_shell_command"} <= set(tools), tools
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in json.dumps(first["messages"][1]["content"])
    # the tool call came back as a tool message answering it
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    log = Path(artifacts["/logs/agent/qwen-code.jsonl"]).read_text()
    assert "Ripgrep not available" not in log and "--yolo" not in log  # its rg runs; no nag
    result = json.loads(log.splitlines()[-1])
    assert (result["type"], result["subtype"], result["num_turns"]) == ("result", "success", 2)
