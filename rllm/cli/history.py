"""``rllm-cli history``: run the history service (the sink into ClickHouse + the query API)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    history_store_options,
    kafka_options,
    kafka_settings,
    reports_errors,
)

__all__ = ["history"]


@click.command()
@kafka_options
@history_store_options
@click.option(
    "--batch-rows",
    type=int,
    default=None,
    envvar="RLLM_HISTORY_BATCH_ROWS",
    help="Insert once this many events are buffered [default: 20000].",
)
@click.option(
    "--batch-s",
    type=float,
    default=None,
    envvar="RLLM_HISTORY_BATCH_S",
    help="Insert at least this often, in seconds [default: 1].",
)
@click.option(
    "--until-idle",
    type=float,
    default=None,
    help="Stop after this many seconds without events (default: run until Ctrl-C).",
)
@reports_errors
def history(
    bootstrap_servers: str | None,
    topic_prefix: str | None,
    history_dir: Path | None,
    clickhouse_url: str | None,
    batch_rows: int | None,
    batch_s: float | None,
    until_idle: float | None,
) -> None:
    """Sink every rllm topic into the history and answer analytics queries."""
    from rllm.consumers.history import HistorySettings, run_service

    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "history_dir": history_dir,
            "clickhouse_url": clickhouse_url,
            "history_batch_rows": batch_rows,
            "history_batch_s": batch_s,
        }.items()
        if v is not None
    }
    settings = HistorySettings(**overrides)
    kafka = kafka_settings(bootstrap_servers, topic_prefix)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    where = settings.clickhouse_url or settings.history_dir
    console.print(f"history: {kafka.bootstrap_servers} prefix {kafka.topic_prefix!r} -> {where}")
    try:
        stats = run_service(kafka, settings, stop=stop, idle_exit_s=until_idle)
    except KeyboardInterrupt:
        return
    console.print(
        f"history: {stats.events} events, {stats.rows} rows, "
        f"{stats.dead_letters} dead letters, {stats.batches} batches"
    )
