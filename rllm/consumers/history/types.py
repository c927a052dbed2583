"""Contracts of the history area: the ``HistoryStore`` port and query results (its
errors, re-exported here, live in ``rllm.consumers.history.errors``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from rllm.consumers.history.errors import HistoryError, QueryError, StoreLockedError

__all__ = [
    "HistoryError",
    "HistoryStore",
    "QueryError",
    "QueryResult",
    "StoreLockedError",
]


@dataclass(frozen=True)
class QueryResult:
    """Rows of a query, column-wise names and row-wise values."""

    columns: tuple[str, ...]
    """Column names in order."""
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    """Rows as tuples of Python values."""

    @classmethod
    def from_arrow(cls, tbl: pa.Table) -> QueryResult:
        """Build from an Arrow table."""
        cols = tbl.to_pydict()
        names = tuple(tbl.column_names)
        return cls(names, list(zip(*(cols[n] for n in names), strict=True)))

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts keyed by column name."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def column(self, name: str) -> list[Any]:
        """One column's values."""
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``columns`` and ``rows``)."""
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows]}


@runtime_checkable
class HistoryStore(Protocol):
    """Where history lives: chDB in-process, a ClickHouse server, or a history service."""

    database: str
    """Database holding the tables."""

    def create_schema(self) -> None:
        """Create the database and its tables if they do not exist."""

    def insert(self, table: str, batch: pa.Table) -> int:
        """Insert an Arrow batch shaped like ``ddl.table(table).schema``; return its rows."""

    def query(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run one read query of ours with ``{name:Type}`` parameters bound by the engine,
        under ``readonly=1`` set by the session."""

    def query_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run one statement a user wrote under ``readonly=1`` and the store's read limits,
        both set by the session (never by the statement); a limit hit is a QueryError."""

    def command(self, sql: str) -> None:
        """Run one statement that returns nothing (DDL, OPTIMIZE)."""

    def close(self) -> None:
        """Release the engine (the chDB directory lock, the HTTP pool)."""
