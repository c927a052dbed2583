"""Terminus-2 end to end: Harbor's own agent (PyPI ``harbor``, on the host's Python 3.12),
driven inside a real local sandbox on a tmux session, solves ``hello-file`` against the
scripted model through a real gateway."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import TERMINUS_SOLVE
from tests.integration.harnesses.test_cli_harnesses import Events, _solve

pytestmark = needs_local_sandbox


async def test_terminus_2_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("terminus-2", TERMINUS_SOLVE, start_gateway, upstream,
                              backend, session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")] * 3  # fmt: skip
    first = calls[0].body or {}
    assert first["model"] == "scripted" and "tools" not in first
    assert [m["role"] for m in first["messages"]] == ["user"]
    prompt = first["messages"][0]["content"]
    assert "Format your response as JSON" in prompt and "Hello, Harbor!" in prompt
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == TERMINUS_SOLVE[0]
    assert "hello.txt" in second[2]["content"]  # the terminal's echo of the command
    third = (calls[2].body or {})["messages"]
    assert "Are you sure you want to mark the task as complete?" in third[-1]["content"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    trajectory = json.loads(Path(artifacts["/logs/agent/trajectory.json"]).read_text())
    assert trajectory["agent"]["name"] == "terminus-2"
    assert "api_key" not in json.dumps(trajectory)
    calls_made = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    typed = [c["arguments"]["keystrokes"] for c in calls_made
             if c["function_name"] == "bash_command"]  # fmt: skip
    assert typed == ["printf 'Hello, Harbor!\\n' > /app/hello.txt\n"]
    assert "Hello, Harbor!" in Path(artifacts["/logs/agent/terminus_2.pane"]).read_text()
