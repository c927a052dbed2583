"""What each third-party CLI harness sent and kept when it solved ``hello-file``: the paths
it called, its tools, the model name, the turns it sent back, its artifacts. One function
a harness, by registry name (``CLI_CHECKS``); the contract suite calls it on every run's
requests (as a recording proxy in front of the gateway saw them) and artifacts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.fakes.recorder import RecordedRequest
from tests.integration.producers.harnesses.scripts import KIMI_SOLVE, MINI_SOLVE, TERMINUS_SOLVE

__all__ = ["CLI_CHECKS", "Check"]

Check = Callable[[list[RecordedRequest], dict[str, str]], None]
"""Asserts on one run's model calls and its artifacts (sandbox path -> host path)."""


def _paths(calls: list[RecordedRequest]) -> list[tuple[str, str]]:
    """Each call's method and API path (after the session's ``/v1/``)."""
    return [(r.method, r.path.rsplit("/v1/", 1)[1]) for r in calls]


def _chat_tools(body: dict[str, object]) -> list[str]:
    """The OpenAI chat tools' names a request offered ("" for a tool without one)."""
    tools = body["tools"]
    assert isinstance(tools, list)
    return [(t.get("function") or {}).get("name") or "" for t in tools]


def mini_swe_agent(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in first["messages"][1]["content"]
    second = (calls[1].body or {})["messages"]
    assert second[2]["content"] == MINI_SOLVE[0]
    assert "<returncode>0</returncode>" in str(second[3]["content"])
    assert Path(artifacts["/logs/agent/mini-swe-agent.traj.json"]).is_file()


def claude_code(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "messages")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted"
    assert any(t.get("name") == "Write" for t in first["tools"])
    # the tool_use the gateway made of the chat tool call came back as a tool_result
    last = (calls[1].body or {})["messages"]
    assert [b["type"] for b in last[-1]["content"] if isinstance(b, dict)][:1] == ["tool_result"]
    assert Path(artifacts["/logs/agent/claude-code.jsonl"]).is_file()


def codex(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "responses")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted" and first["stream"] is True
    assert Path(artifacts["/logs/agent/codex.jsonl"]).is_file()


def opencode(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted"
    assert "write" in _chat_tools(first)
    assert Path(artifacts["/logs/agent/opencode.jsonl"]).is_file()


def aider(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")]
    first = calls[0].body or {}
    assert (first["model"], first["stream"], first["temperature"]) == ("scripted", True, 0)
    assert "tools" not in first  # edits are file listings in the reply, not tool calls
    messages = first["messages"]
    assert messages[0]["role"] == "system" and "*file listing*" in messages[0]["content"]
    assert messages[-1]["role"] == "user" and "Hello, Harbor!" in messages[-1]["content"]
    history = Path(artifacts["/logs/agent/aider.chat.history.md"]).read_text()
    assert "Applied edit to /app/hello.txt" in history
    assert Path(artifacts["/logs/agent/aider.llm.history"]).is_file()


def kimi_cli(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
    first = calls[0].body or {}
    assert (first["model"], first["stream"]) == ("scripted", True)
    tools = set(_chat_tools(first))
    assert {"Shell", "WriteFile", "StrReplaceFile", "ReadFile", "Grep"} <= tools, sorted(tools)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # the tool call came back as kimi's tool result, with the call's id
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    call = second[-2]["tool_calls"][0]
    assert call["function"]["name"] == "WriteFile" and second[-1]["tool_call_id"] == call["id"]
    events = Path(artifacts["/logs/agent/kimi-cli.jsonl"]).read_text().splitlines()
    assert json.loads(events[-1]) == {"role": "assistant", "content": KIMI_SOLVE[-1]}
    assert Path(artifacts["/logs/agent/kimi-cli.log"]).is_file()


def kilocode(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
    first = calls[0].body or {}
    assert (first["model"], first["stream"], first["tool_choice"]) == ("scripted", True, "auto")
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in str(first["messages"][1]["content"])
    tools = set(_chat_tools(first))
    assert {"bash", "edit", "read", "write"} <= tools, sorted(tools)
    # the write tool's call and its result came back in the second request
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[2:]] == ["assistant", "tool"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "write"
    assert second[3]["content"] == "Wrote file successfully."
    assert Path(artifacts["/logs/agent/kilocode.jsonl"]).is_file()


def terminus_2(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 3
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
    trajectory = json.loads(Path(artifacts["/logs/agent/trajectory.json"]).read_text())
    assert trajectory["agent"]["name"] == "terminus-2"
    assert "api_key" not in json.dumps(trajectory)
    made = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    typed = [c["arguments"]["keystrokes"] for c in made if c["function_name"] == "bash_command"]
    assert typed == ["printf 'Hello, Harbor!\\n' > /app/hello.txt\n"]
    assert "Hello, Harbor!" in Path(artifacts["/logs/agent/terminus_2.pane"]).read_text()


def qwen_code(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
    first = calls[0].body or {}
    assert first["model"] == "scripted" and first["stream"] is True
    assert calls[0].headers["user-agent"].startswith("QwenCode/0.24.4")
    tools = _chat_tools(first)
    assert {"write_file", "edit", "read_file", "run_shell_command"} <= set(tools), tools
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Hello, Harbor!" in json.dumps(first["messages"][1]["content"])
    # the tool call came back as a tool message answering it
    second = (calls[1].body or {})["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    log = Path(artifacts["/logs/agent/qwen-code.jsonl"]).read_text()
    assert "Ripgrep not available" not in log and "--yolo" not in log  # its rg runs; no nag
    result = json.loads(log.splitlines()[-1])
    assert (result["type"], result["subtype"], result["num_turns"]) == ("result", "success", 2)


def continue_cli(calls: list[RecordedRequest], artifacts: dict[str, str]) -> None:
    assert _paths(calls) == [("POST", "chat/completions")] * 2
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
    answer = Path(artifacts["/logs/agent/continue.log"]).read_text().strip()
    assert answer.endswith("I wrote /app/hello.txt.")
    session = json.loads(Path(artifacts["/logs/agent/continue-session.json"]).read_text())
    assert "Write" in json.dumps(session)


CLI_CHECKS: dict[str, Check] = {
    "mini-swe-agent": mini_swe_agent,
    "claude-code": claude_code,
    "codex": codex,
    "opencode": opencode,
    "aider": aider,
    "kimi-cli": kimi_cli,
    "kilocode": kilocode,
    "terminus-2": terminus_2,
    "qwen-code": qwen_code,
    "continue": continue_cli,
}
"""Each third-party harness's own assertions, by registry name (``CLI_SOLVE``'s keys)."""
