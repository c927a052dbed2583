"""Named analytics queries over the history, with typed parameters bound by the engine.

Every query takes the same optional filters (``run``, ``benchmark``, ``model``) plus its
own parameters; values are checked here (a bad one is named in the error) and bound as
``{name:Type}`` placeholders, never pasted into the SQL. Tables with counts are read with
``FINAL`` so re-delivered rows do not count twice; per-session lookups use ``argMax``/``any``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rllm.consumers.history import sql
from rllm.consumers.history.ddl import TABLES
from rllm.consumers.history.types import HistoryStore, QueryError, QueryResult

__all__ = ["QUERIES", "NamedQuery", "run_named", "run_sql", "table_list"]


def _int(lo: int, hi: int) -> Callable[[str, Any], int]:
    def conv(name: str, value: Any) -> int:
        try:
            out = int(value)
        except (TypeError, ValueError):
            raise QueryError(f"parameter {name!r}: expected an integer, got {value!r}") from None
        if not lo <= out <= hi:
            raise QueryError(f"parameter {name!r}: must be between {lo} and {hi}, got {out}")
        return out

    return conv


def _str(name: str, value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class NamedQuery:
    """One named query: SQL per ``by`` variant and its parameters."""

    name: str
    """Name on the command line."""
    doc: str
    """One line shown by ``rllm-cli analytics --help``."""
    sql: dict[str, str]
    """SQL per ``by`` value (the first is the default)."""
    params: dict[str, tuple[Callable[[str, Any], Any], Any]]
    """Own parameters: converter and default."""
    plot: dict[str, tuple[str, tuple[str, ...]]]
    """Per ``by`` value that is a series: x column and y columns."""
    series_by: str = ""
    """Column whose values each get their own line in a plot ('' : one line)."""


_COMMON: dict[str, tuple[Callable[[str, Any], Any], Any]] = {
    "run": (_str, ""),
    "benchmark": (_str, ""),
    "model": (_str, ""),
    "limit": (_int(1, 1_000_000), 1000),
}
_BUCKET = {"bucket_s": (_int(1, 366 * 86400), 3600)}

_XY = ("mean_reward", "accuracy")
QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in (
        NamedQuery(
            "runs", "runs: sessions, steps, tokens, reward, accuracy", {"run": sql.RUNS}, {}, {}
        ),
        NamedQuery(
            "rewards",
            "reward and accuracy per run, by policy version or by time",
            {"policy_version": sql.REWARDS_BY_VERSION, "time": sql.REWARDS_BY_TIME},
            _BUCKET,
            {"policy_version": ("policy_version", _XY), "time": ("bucket", _XY)},
            series_by="run_id",
        ),
        NamedQuery(
            "passk",
            "pass@k per benchmark and model, or per run too (unbiased estimator)",
            {"benchmark": sql.PASSK, "run": sql.PASSK_BY_RUN},
            {"k": (_int(1, 10_000), 1)},
            {},
        ),
        NamedQuery("tokens", "token usage by model and harness", {"model": sql.TOKENS}, {}, {}),
        NamedQuery(
            "latency",
            "p50/p95/p99 of upstream latency and of the latency added",
            {"model": sql.LATENCY_BY_MODEL, "time": sql.LATENCY_BY_TIME},
            _BUCKET,
            {"time": ("bucket", ("upstream_ms", "added_ms"))},
        ),
        NamedQuery(
            "staleness",
            "policy-version lag of the tokens that reached training",
            {"lag": sql.STALENESS},
            {},
            {"lag": ("lag", ("pct_tokens",))},
        ),
        NamedQuery(
            "failures",
            "failed steps, unfinished sessions and dead letters",
            {"kind": sql.FAILURES},
            {},
            {},
        ),
    )
}


def run_named(store: HistoryStore, name: str, by: str | None = None, **params: Any) -> QueryResult:
    """Run a named query with checked, bound parameters.

    Raises:
        QueryError: for an unknown query, ``by`` value or parameter, naming it.
    """
    query = QUERIES.get(name)
    if query is None:
        raise QueryError(f"unknown query {name!r}; known: {', '.join(QUERIES)}")
    by = by or next(iter(query.sql))
    if by not in query.sql:
        raise QueryError(f"parameter 'by': {name} groups by {', '.join(query.sql)}, got {by!r}")
    spec = {**_COMMON, **query.params}
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise QueryError(
            f"parameter {unknown[0]!r} is not a parameter of {name}; "
            f"known: {', '.join(sorted(spec))}"
        )
    text = query.sql[by].replace("__DB__", f"`{store.database}`")
    values = {
        k: conv(k, params[k] if params.get(k) is not None else default)
        for k, (conv, default) in spec.items()
    }
    bound = {k: v for k, v in values.items() if "{" + k + ":" in text}
    return store.query(text, bound)


def run_sql(store: HistoryStore, text: str) -> QueryResult:
    """Run the escape hatch: one SELECT a user wrote, under ``readonly=1`` and the read limits.

    ``__DB__`` stands for the history database. ``store.query_user`` checks the statement
    on the engine's own parse (``sqlguard``; in the history service when ``store`` is its
    client) and runs it in the session that sets ``readonly=1`` and the limits.

    Raises:
        QueryError: naming what was refused, the limit that stopped it, or the syntax error.
    """
    try:
        return store.query_user(text.replace("__DB__", f"`{store.database}`"))
    except QueryError as exc:
        if "Unknown table" not in str(exc) and "UNKNOWN_TABLE" not in str(exc):
            raise
        raise QueryError(
            f"{exc} (the history's tables are read as {store.database}.<table> or "
            f"__DB__.<table>; `rllm-cli analytics tables` lists them and their columns)"
        ) from None


def table_list(database: str) -> QueryResult:
    """The history's tables, each with what a row is and its columns (name and type)."""
    return QueryResult(
        ("table", "row", "columns"),
        [
            (
                f"{database}.{t.name}",
                t.doc,
                "; ".join(
                    f"{c.name} {c.ch_type.removesuffix(' CODEC(ZSTD(1))')}" for c in t.columns
                ),
            )
            for t in TABLES.values()
        ],
    )
