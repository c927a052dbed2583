"""What both history engines (chDB, a ClickHouse server) do the same way around their own
calls: create the schema, skip an empty insert, send a user's statement through
``sqlguard`` before running it with the read limits."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rllm.consumers.history.ddl import create_statements
from rllm.consumers.history.limits import ReadLimits
from rllm.consumers.history.sqlguard import guard
from rllm.consumers.history.types import QueryResult

__all__ = ["EngineBase"]


class EngineBase:
    """Base of the ``HistoryStore`` engines; each implements ``command``, ``query``,
    ``_insert``, ``_run_user`` and ``close``."""

    database: str
    """The database holding the tables."""
    limits: ReadLimits
    """The read limits of a user's statement (``query_user``)."""

    def create_schema(self) -> None:
        """Create the database and tables if missing."""
        for stmt in create_statements(self.database):
            self.command(stmt)

    def insert(self, table: str, batch: pa.Table) -> int:
        """Insert an Arrow batch into ``table``; returns its rows (an empty one is not sent)."""
        if batch.num_rows == 0:
            return 0
        self._insert(table, batch)
        return int(batch.num_rows)

    def query_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a user's statement, checked by ``sqlguard`` on the engine's own parse, with
        ``readonly=1`` and the limits."""
        return self._run_user(guard(self._run_user, sql, params, self.database), params)

    def command(self, sql: str) -> None:
        """Run a statement that returns nothing."""
        raise NotImplementedError

    def _insert(self, table: str, batch: pa.Table) -> None:
        """Send a non-empty Arrow batch to ``table``."""
        raise NotImplementedError

    def _run_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a statement with ``readonly=1`` and the limits, unchecked (the guard's own
        parses)."""
        raise NotImplementedError
