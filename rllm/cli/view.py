"""``rllm-cli view``: the history in a browser (runs, curves, trajectories, comparisons)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    err_console,
    history_settings,
    history_store_options,
    listen_options,
    reports_errors,
)

__all__ = ["view"]


@click.command()
@listen_options("VIEW", 8500)
@click.option(
    "--insecure",
    is_flag=True,
    default=None,
    envvar="RLLM_VIEW_INSECURE",
    help="Allow a --host that is not loopback: the viewer has no login, so anyone who "
    "reaches it reads the whole history.",
)
@click.option(
    "--refresh-s",
    type=float,
    default=None,
    envvar="RLLM_VIEW_REFRESH_S",
    help="Seconds between two refreshes of a run still being written [3].",
)
@history_store_options
@reports_errors
def view(history_dir: Path | None, clickhouse_url: str | None, **flags: Any) -> None:
    """Serve a read-only web page over the history that `rllm-cli analytics` reads."""
    from rllm.consumers.viewer import ViewerSettings, is_loopback, serve
    from rllm.consumers.viewer.serve import already_serving

    settings = ViewerSettings(**{k: v for k, v in flags.items() if v is not None})
    settings.check_host()
    history = history_settings(history_dir, clickhouse_url)
    if already_serving(settings):
        console.print(f"view: the viewer is already at {settings.base_url}")
        return
    if not is_loopback(settings.host):
        err_console.print(
            f"[red]warning:[/red] --insecure: serving the history on {settings.host}; anyone "
            "who reaches it reads every run, prompt and answer"
        )
    where = history.clickhouse_url or history.history_dir
    console.print(f"view: {settings.base_url} over the history in {where} (read-only)")
    serve(settings, history)
