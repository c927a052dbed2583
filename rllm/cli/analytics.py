"""``rllm-cli analytics``: named queries over the history, and a read-only SQL escape hatch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    err_console,
    history_settings,
    history_store_options,
    is_terminal,
    reports_errors,
)

__all__ = ["analytics"]

_NAMES = (
    "runs",
    "rewards",
    "passk",
    "tokens",
    "latency",
    "staleness",
    "failures",
    "sql",
    "tables",
)


@click.command()
@click.argument("query", type=click.Choice(_NAMES))
@click.argument("sql_text", required=False)
@click.option(
    "--by",
    default=None,
    help="Grouping: rewards policy_version|time, latency model|time, passk benchmark|run.",
)
@click.option("--run", default=None, help="Only this run_id.")
@click.option("--benchmark", default=None, help="Only this benchmark.")
@click.option("--model", default=None, help="Only this model.")
@click.option("--k", default=None, help="k of pass@k [default: 1].")
@click.option("--bucket-s", default=None, help="Time bucket in seconds [default: 3600].")
@click.option("--limit", default=None, help="Most rows returned [default: 1000].")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "tsv", "json", "csv"]),
    default="table",
    help="table: a rich table on a terminal, tab-separated lines (as tsv) in a pipe or file.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a PNG of the time series (rewards, latency --by time, staleness).",
)
@history_store_options
@reports_errors
def analytics(
    query: str,
    sql_text: str | None,
    by: str | None,
    fmt: str,
    plot: Path | None,
    history_dir: Path | None,
    clickhouse_url: str | None,
    **params: Any,
) -> None:
    """Run a named QUERY over the history (or `sql "SELECT ..."`, read-only).

    \b
    runs       sessions, steps, tokens, reward and accuracy per run
    rewards    reward and accuracy per run --by policy_version (default) or time
    passk      pass@k per benchmark and model (--k), --by run: per run too
    tokens     token usage by model and harness
    latency    p50/p95/p99 upstream and added latency --by model or time
    staleness  policy-version lag of the tokens that reached training
    failures   failed steps, unfinished sessions, dead letters
    sql        one read-only SELECT over the tables (rllm.steps, rllm.sessions, ...)
    tables     the history's tables: what a row is, and their columns
    """
    from rllm.consumers.history import QueryError, open_store, run_named, run_sql
    from rllm.consumers.history.queries import QUERIES, table_list
    from rllm.consumers.history.render import to_csv, to_json, to_rich, to_tsv

    settings = history_settings(history_dir, clickhouse_url)
    given = {k: v for k, v in params.items() if v is not None}
    if query == "tables" and (sql_text or given or plot):
        raise QueryError("tables: takes no SQL, filter or --plot")
    if query == "sql" and not sql_text:
        raise QueryError("sql: give the SELECT statement as the second argument")
    if query != "sql" and sql_text:
        raise QueryError(f"{query}: takes no SQL argument (got {sql_text!r}); use `sql`")
    store = open_store(settings) if query != "tables" else None
    try:
        if store is None:
            result = table_list(settings.history_database)
        elif query == "sql":
            result = run_sql(store, str(sql_text))
        else:
            for key in given:
                if (
                    key not in ("run", "benchmark", "model", "limit")
                    and key not in QUERIES[query].params
                ):
                    raise QueryError(f"parameter {key!r} does not apply to {query}")
            result = run_named(store, query, by, **given)
    finally:
        if store is not None:
            store.close()
    if plot is not None:
        _plot(query, by, result, plot)
    if fmt == "json":
        click.echo(to_json(result))
    elif fmt == "csv":
        click.echo(to_csv(result), nl=False)
    elif fmt == "tsv" or not is_terminal():
        click.echo(to_tsv(result), nl=False)
    else:
        console.print(to_rich(result, title=query))


def _plottable() -> str:
    """Every query and --by that --plot draws, as a user would type them."""
    from rllm.consumers.history.queries import QUERIES

    out = []
    for name, q in QUERIES.items():
        default = next(iter(q.sql))
        out += [name if by == default else f"{name} --by {by}" for by in q.plot]
    return ", ".join(out)


def _plot(query: str, by: str | None, result: Any, path: Path) -> None:
    """Draw ``result`` into ``path``, or say which queries draw (naming only what was typed)."""
    from rllm.consumers.history import QueryError
    from rllm.consumers.history.queries import QUERIES
    from rllm.consumers.history.render import plot_result

    named = QUERIES.get(query)
    chosen = by or (next(iter(named.sql)) if named is not None else "")
    if named is None or chosen not in named.plot:
        what = f"{query} --by {by}" if by else query
        raise QueryError(f"--plot: {what} is not a time series; --plot draws {_plottable()}")
    x, ys = named.plot[chosen]
    title = f"{query} by {chosen}" + (f" per {named.series_by}" if named.series_by else "")
    plot_result(result, x, ys, path, title, group=named.series_by or None)
    err_console.print(f"wrote {path}")
