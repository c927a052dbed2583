"""The agent loops of the ``bash`` and ``react`` harnesses, run INSIDE the sandbox by a bare
interpreter (standard library only; this file is copied into the snapshot and never
imported by rllm).

Both ask the model through the OpenAI chat API at ``OPENAI_BASE_URL``, one call a turn:

- ``--style text`` (``bash``): the reply is one shell command (``run: CMD``, or a fenced
  code block), run with ``/bin/sh`` in the workdir, or ``done``;
- ``--style tools`` (``react``): the model calls the tools ``bash``, ``edit`` and
  ``submit``; ``submit`` (or a reply with no tool call) ends the run.

``RLLM_SAMPLING`` (a JSON object) is sent with every call (``temperature``, ``max_tokens``).
Every turn is appended to the log as one JSON line (an artifact, not training data).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = ["TOOLS", "edit_file", "main", "parse_reply", "run_command"]

TEXT_PROMPT = """You are an agent working in a Linux shell to solve a task.
Each reply must be exactly one of:
  run: <one shell command>      (or the command alone in a ```sh fenced block)
  done                          (when the task is solved)
After each command you get its exit code and output. Work in the current directory."""

TOOLS_PROMPT = """You are an agent working in a Linux sandbox to solve a task. Use the tools:
bash runs a shell command, edit writes or changes a file, submit ends your work."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one shell command; returns exit code and output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit",
            "description": "Write `content` to `path`, or replace the one occurrence of `old` "
            "in it with `new`.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "old": {"type": "string"},
                    "new": {"type": "string"},
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "End the task.",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}},
        },
    },
]

_FENCE = re.compile(r"```(?:sh|bash|shell)?\s*\n(.*?)```", re.DOTALL)
_RUN = re.compile(r"^\s*run:\s?(.*)$", re.DOTALL)
_RUN_LINE = re.compile(r"^[ \t]*run:[ \t]*(\S.*)$", re.MULTILINE)
OUTPUT_CHARS = 8000
"""How much of a command's output goes back to the model."""


def parse_reply(text: str) -> tuple[str, str | None]:
    """``("done", None)``, ``("run", command)``, or ``("none", None)`` for a reply that
    holds neither. A command is the rest of a reply that starts with ``run:``, else the
    first fenced block (its own ``run:`` dropped), else the first line that starts with
    ``run:``."""
    stripped = text.strip()
    if re.fullmatch(r"done[.!]?", stripped, re.IGNORECASE):
        return "done", None
    match = _RUN.match(stripped)
    if match and match.group(1).strip():
        return "run", match.group(1).strip()
    fence = _FENCE.search(stripped)
    if fence and fence.group(1).strip():
        block = fence.group(1).strip()  # a small model fences its `run:` line too
        inner = _RUN.match(block)
        return "run", inner.group(1).strip() if inner and inner.group(1).strip() else block
    line = _RUN_LINE.search(stripped)  # `run: CMD` on a line of its own after some prose
    if line:
        return "run", line.group(1).strip()
    return "none", None


def chat(base_url: str, api_key: str, body: dict[str, Any]) -> dict[str, Any]:
    """One chat completion; its first choice's message."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=600) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    message: dict[str, Any] = answer["choices"][0]["message"]
    return message


def run_command(command: str, workdir: str, timeout_s: float) -> str:
    """Run ``command`` with /bin/sh; its exit status and output as the model sees them."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # the loop's own
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s:g} s"
    output = done.stdout.decode("utf-8", "replace")[-OUTPUT_CHARS:]
    return f"exit code {done.returncode}\n{output}"


def edit_file(args: dict[str, Any], workdir: str) -> str:
    """The ``edit`` tool: write ``content``, or replace the one ``old`` with ``new``."""
    path = os.path.join(workdir, str(args.get("path", "")))
    if "content" in args:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(args["content"]))
        return f"wrote {path}"
    old, new = str(args.get("old", "")), str(args.get("new", ""))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        return f"error: {exc}"
    if not old or text.count(old) != 1:
        return f"error: `old` occurs {text.count(old) if old else 0} times in {path}, not once"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    return f"edited {path}"


def tools_turn(
    message: dict[str, Any], args: argparse.Namespace, messages: list[dict[str, Any]]
) -> tuple[bool, list[dict[str, Any]]]:
    """Run a reply's tool calls; whether the run is over, and what each call returned."""
    calls = message.get("tool_calls") or []
    messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
    results, over = [], not calls
    for call in calls:
        name = call.get("function", {}).get("name")
        try:
            params = json.loads(call.get("function", {}).get("arguments") or "{}")
        except ValueError as exc:
            params, name = {}, f"bad arguments: {exc}"
        if name == "bash":
            result = run_command(str(params.get("command", "")), args.workdir, args.timeout)
        elif name == "edit":
            result = edit_file(params, args.workdir)
        elif name == "submit":
            result, over = "submitted", True
        else:
            result = f"error: unknown tool {name!r}; use bash, edit or submit"
        messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
        results.append({"tool": name, "arguments": params, "result": result})
    return over, results


def text_turn(
    message: dict[str, Any], args: argparse.Namespace, messages: list[dict[str, Any]]
) -> tuple[bool, list[dict[str, Any]]]:
    """Run a reply's command (or see it say done)."""
    reply = str(message.get("content") or "")
    kind, command = parse_reply(reply)
    messages.append({"role": "assistant", "content": reply})
    if kind == "done":
        return True, [{"kind": kind}]
    if command is None:
        observation = "Reply with `run: <command>` or `done`."
    else:
        observation = run_command(command, args.workdir, args.timeout)
    messages.append({"role": "user", "content": observation})
    return False, [{"kind": kind, "command": command, "observation": observation}]


def main(argv: list[str] | None = None) -> int:
    """Run the loop; 0 when the model ended it (or it ran out of turns with
    ``--turn-limit-ends``), 2 when it ran out of turns, 1 on error."""
    parser = argparse.ArgumentParser(description="rllm's in-sandbox agent loop")
    parser.add_argument("--style", choices=["text", "tools"], default="text")
    parser.add_argument("--instruction", required=True)
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--log", required=True)
    parser.add_argument("--max-turns", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a command")
    parser.add_argument(
        "--turn-limit-ends",
        action="store_true",
        help="running out of turns ends the run (0), not an error (2)",
    )
    args = parser.parse_args(argv)
    base_url, api_key = os.environ["OPENAI_BASE_URL"], os.environ.get("OPENAI_API_KEY", "")
    model = os.environ.get("RLLM_MODEL", "default")
    sampling = json.loads(os.environ.get("RLLM_SAMPLING") or "{}")  # temperature, max_tokens
    with open(args.instruction, encoding="utf-8") as f:
        instruction = f.read()
    tools = args.style == "tools"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": TOOLS_PROMPT if tools else TEXT_PROMPT},
        {"role": "user", "content": instruction},
    ]
    os.makedirs(os.path.dirname(args.log) or ".", exist_ok=True)
    with open(args.log, "a", encoding="utf-8") as log:
        for turn in range(args.max_turns):
            start = time.time()
            body: dict[str, Any] = {**sampling, "model": model, "messages": messages}
            if tools:
                body["tools"] = TOOLS
            try:
                message = chat(base_url, api_key, body)
            except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
                print(f"agent loop: model call {turn} failed: {exc}", file=sys.stderr)
                return 1
            over, results = (tools_turn if tools else text_turn)(message, args, messages)
            entry = {
                "turn": turn,
                "reply": message,
                "results": results,
                "seconds": round(time.time() - start, 3),
            }
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(json.dumps(results))
            if over:
                print(f"agent loop: ended after {turn + 1} model calls")
                return 0
    if args.turn_limit_ends:
        print(f"agent loop: ended at its limit of {args.max_turns} turns")
        return 0
    print(f"agent loop: not ended after {args.max_turns} turns", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
