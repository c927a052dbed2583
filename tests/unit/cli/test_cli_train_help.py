"""``rllm-cli train``, ``train consume`` and ``train sft`` list their options in named groups,
each option once, with choices and defaults from the settings."""

from __future__ import annotations

import re
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rllm.cli.groups import GroupedCommand
from rllm.cli.main import cli
from rllm.cli.train import OPTION_GROUPS, train
from rllm.cli.train_consume import OPTION_GROUPS as CONSUME_GROUPS
from rllm.cli.train_consume import consume
from rllm.cli.train_sft import OPTION_GROUPS as SFT_GROUPS
from rllm.cli.train_sft import sft


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


@pytest.mark.parametrize(
    ("args", "command", "groups", "count"),
    [
        ([], train, OPTION_GROUPS, 38),
        (["consume"], consume, CONSUME_GROUPS, 24),
        (["sft"], sft, SFT_GROUPS, 20),
    ],
)
def test_train_help_shows_the_groups_in_order_and_every_option_once(
    args: list[str], command: click.Command, groups: Any, count: int
) -> None:
    result = CliRunner().invoke(cli, ["train", *args, "--help"])
    assert result.exit_code == 0, result.output
    sections = _sections(result.output)
    titles = [title for title, _ in groups]
    assert [t for t in sections if t != "Commands"] == [*titles, "Options"]
    assert sections["Trainer"][:2] == ["--backend", "--model"] or args == ["sft"]
    assert sections["Kafka"] == ["--bootstrap-servers", "--topic-prefix"]
    assert sections["Options"] == ["--help"]
    flags = [f for rows in sections.values() for f in rows]
    every = [o for p in command.params for o in p.opts if o.startswith("--")] + ["--help"]
    assert sorted(flags) == sorted(every) and len(flags) == len(set(flags)) == count


def test_each_train_command_has_its_own_options() -> None:
    sections = {
        name: _sections(CliRunner().invoke(cli, ["train", *args, "--help"]).output)
        for name, args in (("loop", []), ("consume", ["consume"]), ("sft", ["sft"]))
    }
    assert sections["loop"]["Distillation (--loss distill)"] == [
        "--teacher-model",
        "--teacher-url",
        "--teacher-api",
    ]
    assert sections["loop"]["Harbor tasks (--tasks-dir)"][0] == "--tasks-dir"
    assert sections["consume"]["Episodes and staleness"] == [
        "--mode",
        "--max-staleness",
        "--uniform-reward",
        "--idle-exit",
    ]
    assert sections["sft"]["Data"] == ["--data-file", "--epochs", "--offline"]
    loop_only = {"--benchmark", "--tasks-dir", "--group-size", "--gateway-url"}
    assert not loop_only & {f for rows in sections["consume"].values() for f in rows}
    assert not loop_only & {f for rows in sections["sft"].values() for f in rows}


def test_choices_and_defaults_come_from_the_settings() -> None:
    text = " ".join(CliRunner().invoke(cli, ["train", "consume", "--help"]).output.split())
    assert "--loss [grpo|reinforce|rloo|sft|distill]" in text
    assert "--mode [sync|async]" in text and "[default: async; env RLLM_MODE]" in text
    assert "[default: 2e-05; env RLLM_LR]" in text and "env RLLM_TRAIN_MODEL]" in text


def test_a_group_naming_an_option_the_command_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match=r"option groups of 'x' name unknown options \['lrr'\]"):
        GroupedCommand("x", params=[click.Option(["--lr"])], option_groups=[("A", ["lrr"])])
    with pytest.raises(ValueError, match=r"list \['lr'\] more than once"):
        GroupedCommand(
            "x", params=[click.Option(["--lr"])], option_groups=[("A", ["lr"]), ("B", ["lr"])]
        )
