"""The bash harness's reply parser (``agent_loop.parse_reply``): what counts as a command."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.producers.harnesses.agent_loop import parse_reply


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("run: ls -l", ("run", "ls -l")),
        ("  done. ", ("done", None)),
        ("```sh\nls -l\n```", ("run", "ls -l")),
        ("Here it is:\n```\nrun: echo 4 > /app/a.txt\n```\nok", ("run", "echo 4 > /app/a.txt")),
        ("Sure, I can.\n  run: echo 4 > /app/a.txt\nIt is done.", ("run", "echo 4 > /app/a.txt")),
        ("The command `run: x` would do it.", ("none", None)),
        ("run:", ("none", None)),
        ("I cannot help with that.", ("none", None)),
    ],
)
def test_parse_reply(reply: str, parsed: tuple[str, str | None]) -> None:
    assert parse_reply(reply) == parsed


def test_the_turn_limit_ends_the_run_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rllm.producers.harnesses import agent_loop

    monkeypatch.setattr(agent_loop, "chat", lambda *_: {"content": "thinking..."})
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    (tmp_path / "task.md").write_text("do it")
    argv = [
        "--instruction",
        str(tmp_path / "task.md"),
        "--workdir",
        str(tmp_path),
        "--log",
        str(tmp_path / "log.jsonl"),
        "--max-turns",
        "2",
    ]
    assert agent_loop.main(argv) == 2
    assert agent_loop.main([*argv, "--turn-limit-ends"]) == 0
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 4
