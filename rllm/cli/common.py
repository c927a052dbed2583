"""What every command shares: the console, error reporting, Kafka and history-store options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console

from rllm.errors import RllmError

__all__ = [
    "console",
    "err_console",
    "history_store_options",
    "kafka_options",
    "kafka_settings",
    "reports_errors",
]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


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
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
                for e in exc.errors()
            ]
            err_console.print("[red]error:[/red] invalid settings: " + "; ".join(lines))
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


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


def kafka_settings(bootstrap_servers: str | None, topic_prefix: str | None) -> Any:
    """KafkaSettings from flags, falling back to the environment."""
    from rllm.settings import KafkaSettings

    overrides: dict[str, Any] = {}
    if bootstrap_servers:
        overrides["bootstrap_servers"] = bootstrap_servers
    if topic_prefix is not None:
        overrides["topic_prefix"] = topic_prefix
    return KafkaSettings(**overrides)
