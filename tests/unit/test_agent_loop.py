"""The bash harness's reply parser (``agent_loop.parse_reply``): what counts as a command."""

from __future__ import annotations

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
