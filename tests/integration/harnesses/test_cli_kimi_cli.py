"""kimi-cli end to end: the real ``kimi-cli`` from PyPI on the host's Python 3.13, bound
into a real local sandbox, writes ``/app/hello.txt`` with its ``WriteFile`` tool; the
verifier gives 1 (``_solve`` checks the steps, token ids, reward and sandbox)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import KIMI_SOLVE
from tests.integration.harnesses.test_cli_harnesses import Events, _solve

pytestmark = needs_local_sandbox


async def test_kimi_cli_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("kimi-cli", KIMI_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 2  # fmt: skip
    first = calls[0].body or {}
    assert (first["model"], first["stream"]) == ("scripted", True)
    tools = {(t.get("function") or {}).get("name") for t in first["tools"]}
    assert {"Shell", "WriteFile", "StrReplaceFile", "ReadFile", "Grep"} <= tools
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # the tool call came back as kimi's tool result, with the call's id
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    call = second[-2]["tool_calls"][0]
    assert call["function"]["name"] == "WriteFile" and second[-1]["tool_call_id"] == call["id"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    events = Path(artifacts["/logs/agent/kimi-cli.jsonl"]).read_text().splitlines()
    assert json.loads(events[-1]) == {"role": "assistant", "content": KIMI_SOLVE[-1]}
    assert Path(artifacts["/logs/agent/kimi-cli.log"]).is_file()
