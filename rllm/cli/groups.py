"""``GroupedCommand`` and ``GroupedGroup``: a click command (or group of commands) whose
``--help`` lists its options in named groups (``rllm-cli train`` has over thirty)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

__all__ = ["GroupedCommand", "GroupedGroup"]


class GroupedCommand(click.Command):
    """A command whose help shows ``option_groups`` in order, then the rest as "Options".

    Args:
        option_groups: ``(title, parameter names)`` pairs; a name is the option's Python
            name (``batch_size`` for ``--batch-size``).
        *args, **kwargs: as for ``click.Command``.

    Raises:
        ValueError: a group names an option the command does not have, or two groups the
            same one.
    """

    def __init__(
        self, *args: Any, option_groups: Sequence[tuple[str, Sequence[str]]] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.option_groups = [(title, tuple(names)) for title, names in option_groups]
        known = {p.name for p in self.params}
        listed = [n for _, names in self.option_groups for n in names]
        unknown = sorted(set(listed) - known)
        if unknown:
            raise ValueError(f"option groups of {self.name!r} name unknown options {unknown}")
        twice = sorted({n for n in listed if listed.count(n) > 1})
        if twice:
            raise ValueError(f"option groups of {self.name!r} list {twice} more than once")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """One section per group, in order; the options no group names last."""
        records = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.name] = record
        for title, names in self.option_groups:
            rows = [records.pop(n) for n in names if n in records]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        if records:
            with formatter.section("Options"):
                formatter.write_dl(list(records.values()))


class GroupedGroup(GroupedCommand, click.Group):
    """A group of commands with options of its own, listed as ``GroupedCommand`` lists
    them, then its commands."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The option groups, then the commands."""
        super().format_options(ctx, formatter)
        self.format_commands(ctx, formatter)
