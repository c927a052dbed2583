"""aider end to end: the real ``aider-chat`` from PyPI, bound into a real local sandbox,
writes ``/app/hello.txt`` from a ``whole`` file listing in the scripted model's reply;
the verifier gives 1 (``_solve`` checks the steps, token ids, reward and sandbox)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rllm.sandboxes import SandboxBackend
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.harnesses.conftest import needs_local_sandbox
from tests.integration.harnesses.scripts import AIDER_SOLVE
from tests.integration.harnesses.test_cli_harnesses import Events, _solve

pytestmark = needs_local_sandbox


async def test_aider_solves_hello_file(
    start_gateway: Callable[..., ThreadedServer],
    upstream: ScriptedUpstream,
    backend: SandboxBackend,
    session_events: Events,
    tmp_path: Path,
) -> None:
    calls, out = await _solve("aider", AIDER_SOLVE, start_gateway, upstream, backend,
                              session_events, tmp_path)  # fmt: skip
    assert [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls] == [
        ("POST", "chat/completions")]  # fmt: skip
    first = calls[0].body or {}
    assert (first["model"], first["stream"], first["temperature"]) == ("scripted", True, 0)
    assert "tools" not in first  # edits are file listings in the reply, not tool calls
    messages = first["messages"]
    assert messages[0]["role"] == "system" and "*file listing*" in messages[0]["content"]
    assert messages[-1]["role"] == "user" and "Hello, Harbor!" in messages[-1]["content"]
    artifacts = out["artifacts"]
    assert isinstance(artifacts, dict)
    history = Path(artifacts["/logs/agent/aider.chat.history.md"]).read_text()
    assert "Applied edit to /app/hello.txt" in history
    assert Path(artifacts["/logs/agent/aider.llm.history"]).is_file()
