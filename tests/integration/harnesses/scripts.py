"""The scripted model's answers that solve ``hello-file``, one list per third-party CLI
harness, in the reply format each CLI parses (the gateway translates the API)."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = [
    "CLAUDE_SOLVE",
    "CLI_SOLVE",
    "CODEX_SOLVE",
    "MEMORY_MB",
    "MINI_SOLVE",
    "OPENCODE_SOLVE",
    "hello_file",
]

TASKS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor_tasks"

MINI_SOLVE = [
    "THOUGHT: write the file.\n\n```mswea_bash_command\n"
    "printf 'Hello, Harbor!\\n' > /app/hello.txt\n```",
    "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
]
"""mini-swe-agent (text-based): one ``mswea_bash_command`` block a reply; the echo ends it."""

CLAUDE_SOLVE = [
    'tool:Write {"file_path": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""Claude Code: its ``Write`` tool (a chat tool call the gateway turns into ``tool_use``),
then a final text."""

CODEX_SOLVE = [
    'tool:exec_command {"cmd": "printf \'Hello, Harbor!\\\\n\' > /app/hello.txt"}',
    "I wrote /app/hello.txt.",
]
"""Codex: its shell tool (a Responses function call), then a final message."""

OPENCODE_SOLVE = [
    'tool:write {"filePath": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""opencode: its ``write`` tool (an OpenAI chat tool call), then a final text."""

CLI_SOLVE = {
    "mini-swe-agent": MINI_SOLVE,
    "claude-code": CLAUDE_SOLVE,
    "codex": CODEX_SOLVE,
    "opencode": OPENCODE_SOLVE,
}
"""Each third-party harness's solving script, by registry name (the contract suite's)."""

MEMORY_MB = {"opencode": 2048}
"""Harnesses that need more than hello-file's ``memory_mb = 512``: opencode (Bun) peaks
above it and is OOM-killed by the sandbox's memory cgroup (seen in ``dmesg``)."""


def hello_file(name: str, tmp: Path) -> Path:
    """The ``hello-file`` task folder for harness ``name``: the shipped one, or a copy under
    ``tmp`` with ``memory_mb`` raised to what the harness needs."""
    shipped = TASKS / "hello-file"
    memory_mb = MEMORY_MB.get(name)
    if memory_mb is None:
        return shipped
    folder = tmp / f"hello-file-{name}"
    shutil.copytree(shipped, folder)
    toml = (folder / "task.toml").read_text()
    assert "memory_mb = 512" in toml, "hello-file's task.toml changed: update hello_file()"
    (folder / "task.toml").write_text(toml.replace("memory_mb = 512", f"memory_mb = {memory_mb}"))
    return folder
