"""What every command shares: the console (and whether it is a terminal), tables for people
and for scripts, error reporting, Kafka and history-store options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rllm.errors import RllmError

__all__ = [
    "console",
    "err_console",
    "harbor_options",
    "history_store_options",
    "image_substitute_option",
    "image_substitutes",
    "is_terminal",
    "kafka_options",
    "kafka_settings",
    "listen_options",
    "print_rows",
    "print_table",
    "reports_errors",
    "table_lines",
]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def is_terminal() -> bool:
    """Whether stdout is a terminal (a person reads it) rather than a pipe or a file (a
    script does): the one place commands decide between wrapped tables with short values
    and full-width tab-separated rows."""
    return console.is_terminal


def _plain(cell: Any) -> str:
    """A table cell as plain text on one line: markup removed, tabs and newlines folded."""
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        text = Text.from_markup(cell).plain
    else:
        text = str(cell)
    return text.replace("\t", " ").replace("\n", "; ")


def table_lines(table: Table) -> list[str]:
    """A rich table as tab-separated lines: the header (when the table shows one), then one
    line per row, every cell whole (no wrapping, no folding, no borders)."""
    columns = table.columns
    lines = ["\t".join(_plain(c.header) for c in columns)] if table.show_header else []
    cells = [list(c.cells) for c in columns]
    lines += ["\t".join(_plain(col[i]) for col in cells) for i in range(table.row_count)]
    return lines


def print_table(table: Table) -> None:
    """Print ``table`` for whoever reads stdout: the rich table on a terminal, else
    tab-separated lines (``table_lines``), which ``cut``, ``sort`` and ``grep`` take whole
    however wide they are; the title and caption then go to stderr, out of the data."""
    if is_terminal():
        console.print(table)
        return
    for note in (table.title, table.caption):
        if note:
            click.echo(_plain(note), err=True)
    for line in table_lines(table):
        click.echo(line)


def print_rows(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """``print_table`` of a table whose cells are all shown whole (folded, never cut): the
    listings of names, ids and paths."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    print_table(table)


def reports_errors(func: F) -> F:
    """Turn RllmErrors and bad settings into one red line and exit status 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RllmError as exc:
            err_console.print(f"[red]error:[/red] {exc}", markup=True)
            sys.exit(1)
        except ValidationError as exc:
            lines = [
                f"{_where(e['loc'])}: {e['msg']} (got {e.get('input')!r})" for e in exc.errors()
            ]
            err_console.print("[red]error:[/red] invalid settings: " + "; ".join(lines))
            sys.exit(2)

    return wrapper  # type: ignore[return-value]  # wraps keeps func's signature


def _where(loc: tuple[int | str, ...]) -> str:
    """A bad setting's name as the user gave it: the flag (``--group-size``) when the
    running command has an option of that field's name (anywhere in its path) set on its
    command line, else the field's path (``clip_eps_low``, set by an ``RLLM_`` variable)."""
    ctx = click.get_current_context(silent=True)
    given: dict[str, str] = {}
    for p in ctx.command.params if ctx is not None else ():
        source = ctx.get_parameter_source(p.name) if ctx is not None and p.name else None
        if isinstance(p, click.Option) and source is click.ParameterSource.COMMANDLINE:
            given[str(p.name)] = max(p.opts, key=len)
    for part in loc:  # ("lr",) from TrainerSettings, ("trainer", "lr") from TrainConfig
        if str(part) in given:
            return given[str(part)]
    return ".".join(map(str, loc))


def kafka_options(func: F) -> F:
    """``--bootstrap-servers`` and ``--topic-prefix``, the same fields as RLLM_ env vars."""
    func = click.option(
        "--topic-prefix",
        default=None,
        envvar="RLLM_TOPIC_PREFIX",
        help="Prefix of every topic name.",
    )(func)
    func = click.option(
        "--bootstrap-servers",
        "-b",
        default=None,
        envvar="RLLM_BOOTSTRAP_SERVERS",
        help="Kafka host:port list [default: 127.0.0.1:9092].",
    )(func)
    return func


def listen_options(service: str, port: int) -> Callable[[F], F]:
    """``--host`` and ``--port`` of a server command, the same fields as ``RLLM_<SERVICE>_HOST``
    and ``RLLM_<SERVICE>_PORT`` (``service``: ``GATEWAY``, ``VIEW``); ``port`` is the help's
    default, the settings class holds the real one."""

    def add(func: F) -> F:
        func = click.option(
            "--port", type=int, default=None, envvar=f"RLLM_{service}_PORT", help=f"Port [{port}]."
        )(func)
        return click.option(
            "--host", default=None, envvar=f"RLLM_{service}_HOST", help="Interface [127.0.0.1]."
        )(func)

    return add


def harbor_options(tasks_dir_help: str, sandbox_help: str) -> Callable[[F], F]:
    """``--tasks-dir``, ``--sandbox-backend`` and the agent's and verifier's timeout
    multipliers: the options of rollouts of Harbor task folders (``eval``, ``train``)."""

    def add(func: F) -> F:
        for name in ("verifier", "agent"):
            func = click.option(
                f"--{name}-timeout-multiplier",
                type=click.FloatRange(0, min_open=True),
                default=1.0,
                show_default=True,
                help=f"Scales each task's [{name}] timeout_sec.",
            )(func)
        func = click.option(
            "--sandbox-backend", envvar="RLLM_SANDBOX_BACKEND", default=None, help=sandbox_help
        )(func)
        return click.option(
            "--tasks-dir",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=None,
            help=tasks_dir_help,
        )(func)

    return add


def image_substitute_option(func: F) -> F:
    """``--image-substitute FROM=TO`` (repeatable): ``SandboxSettings.image_substitutes``."""
    return click.option(
        "--image-substitute",
        "image_substitute",
        multiple=True,
        metavar="FROM=TO",
        help="Use image TO wherever FROM is asked for (a task's image, a Dockerfile's FROM); "
        "repeatable. Each use logs a WARNING and labels the image rllm.substituted-from "
        "[env RLLM_SANDBOX_IMAGE_SUBSTITUTES, JSON].",
    )(func)


def image_substitutes(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--image-substitute`` values as a map; a malformed pair is a usage error."""
    from rllm.sandboxes.images.resolve import parse_substitutes

    try:
        return parse_substitutes(pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--image-substitute") from exc


def history_store_options(func: F) -> F:
    """``--history-dir`` and ``--clickhouse-url``, the same fields as RLLM_ env vars."""
    func = click.option(
        "--clickhouse-url",
        default=None,
        envvar="RLLM_CLICKHOUSE_URL",
        help="Use this ClickHouse server instead of chDB.",
    )(func)
    func = click.option(
        "--history-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        envvar="RLLM_HISTORY_DIR",
        help="chDB directory [default: ~/.rllm/history].",
    )(func)
    return func


def history_settings(history_dir: Path | None, clickhouse_url: str | None) -> Any:
    """HistorySettings from ``history_store_options``' flags, falling back to the environment."""
    from rllm.consumers.history import HistorySettings

    overrides: dict[str, Any] = {}
    if history_dir is not None:
        overrides["history_dir"] = history_dir
    if clickhouse_url:
        overrides["clickhouse_url"] = clickhouse_url
    return HistorySettings(**overrides)


def kafka_settings(bootstrap_servers: str | None, topic_prefix: str | None) -> Any:
    """KafkaSettings from flags, falling back to the environment."""
    from rllm.settings import KafkaSettings

    overrides: dict[str, Any] = {}
    if bootstrap_servers:
        overrides["bootstrap_servers"] = bootstrap_servers
    if topic_prefix is not None:
        overrides["topic_prefix"] = topic_prefix
    return KafkaSettings(**overrides)
