"""``rllm-cli train --help`` lists its options in named groups, each option once."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from rllm.cli.groups import GroupedCommand
from rllm.cli.main import cli
from rllm.cli.train import OPTION_GROUPS, train


def _sections(text: str) -> dict[str, list[str]]:
    """Each ``Title:`` section of a help text and the long flags its rows start with."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and (row := re.match(r"  (?:-\w, )?(--[\w-]+)", line)):
            current.append(row[1])
    return sections


def test_train_help_shows_the_groups_in_order_and_every_option_once() -> None:
    result = CliRunner().invoke(cli, ["train", "--help"])
    assert result.exit_code == 0, result.output
    sections = _sections(result.output)
    titles = [title for title, _ in OPTION_GROUPS]
    assert list(sections) == [*titles, "Options"]
    assert sections["Trainer (every mode)"][:2] == ["--backend", "--model"]
    assert sections["Distillation (--loss distill)"] == [
        "--teacher-model",
        "--teacher-url",
        "--teacher-api",
    ]
    assert sections["Harbor tasks (--tasks-dir)"][0] == "--tasks-dir"
    assert sections["SFT on a file (--loss sft --data-file)"] == ["--data-file", "--offline"]
    assert sections["Kafka"] == ["--bootstrap-servers", "--topic-prefix"]
    assert sections["Options"] == ["--help"]
    flags = [f for rows in sections.values() for f in rows]
    every = [o for p in train.params for o in p.opts if o.startswith("--")] + ["--help"]
    assert sorted(flags) == sorted(every) and len(flags) == len(set(flags)) == 40


def test_a_group_naming_an_option_the_command_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match=r"option groups of 'x' name unknown options \['lrr'\]"):
        GroupedCommand("x", params=[click.Option(["--lr"])], option_groups=[("A", ["lrr"])])
    with pytest.raises(ValueError, match=r"list \['lr'\] more than once"):
        GroupedCommand(
            "x", params=[click.Option(["--lr"])], option_groups=[("A", ["lr"]), ("B", ["lr"])]
        )
