"""The scripted model's answers that solve ``hello-file``, one list per third-party CLI
harness, in the reply format each CLI parses (the gateway translates the API)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.paths import HARBOR_TASKS as TASKS

__all__ = [
    "AIDER_SOLVE",
    "CLAUDE_SOLVE",
    "CLI_SOLVE",
    "CODEX_SOLVE",
    "CONTINUE_SOLVE",
    "KILOCODE_SOLVE",
    "KIMI_SOLVE",
    "MEMORY_MB",
    "MINI_SOLVE",
    "OPENCODE_SOLVE",
    "QWEN_SOLVE",
    "TERMINUS_SOLVE",
    "hello_file",
]


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

AIDER_SOLVE = [
    "I will create the file.\n\n/app/hello.txt\n```\nHello, Harbor!\n```\n",
]
"""aider (``whole`` edit format, its choice for a model it does not know): one reply with
a file listing (the path's line, then the whole file in a fence); ``--message-file`` mode
applies it and exits, so one model call."""

KIMI_SOLVE = [
    'tool:WriteFile {"path": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""kimi-cli: its ``WriteFile`` tool (an OpenAI chat tool call), then a final text."""

KILOCODE_SOLVE = [
    'tool:write {"filePath": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""Kilo: its ``write`` tool (an OpenAI chat tool call), then a final text."""

TERMINUS_SOLVE = [
    '{"analysis": "The file does not exist yet.", "plan": "Write it with printf.", '
    '"commands": [{"keystrokes": "printf \'Hello, Harbor!\\\\n\' > /app/hello.txt\\n", '
    '"duration": 1.0}], "task_complete": false}',
    '{"analysis": "The file is written.", "plan": "Mark the task complete.", '
    '"commands": [], "task_complete": true}',
    '{"analysis": "The file is written.", "plan": "Confirm completion.", '
    '"commands": [], "task_complete": true}',
]
"""Terminus-2 (JSON parser): one keystroke batch that writes the file, then
``task_complete``, then ``task_complete`` again when it asks to confirm. Terminus reads the
pane ``duration`` seconds after typing: 1 s (Harbor's default), not 0.1, so that a loaded
machine has echoed the command by then (two runs at once, on two shared cores)."""

QWEN_SOLVE = [
    'tool:write_file {"file_path": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""qwen-code: its ``write_file`` tool (absolute ``file_path``), then a final text."""

CONTINUE_SOLVE = [
    'tool:Write {"filepath": "/app/hello.txt", "content": "Hello, Harbor!\\n"}',
    "I wrote /app/hello.txt.",
]
"""continue: its ``Write`` tool (``filepath``, ``content``), then a final text."""

CLI_SOLVE = {
    "mini-swe-agent": MINI_SOLVE,
    "claude-code": CLAUDE_SOLVE,
    "codex": CODEX_SOLVE,
    "opencode": OPENCODE_SOLVE,
    "aider": AIDER_SOLVE,
    "kimi-cli": KIMI_SOLVE,
    "kilocode": KILOCODE_SOLVE,
    "terminus-2": TERMINUS_SOLVE,
    "qwen-code": QWEN_SOLVE,
    "continue": CONTINUE_SOLVE,
}
"""Each third-party harness's solving script, by registry name (the contract suite's)."""

MEMORY_MB = {"opencode": 2048, "kilocode": 2048}
"""Harnesses that need more than hello-file's ``memory_mb = 512``: opencode and kilocode
(Bun; Kilo peaks at 0.75 GB) are OOM-killed by the sandbox's memory cgroup at 512 MB."""


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
