"""The server engine: a ClickHouse server reached with ``clickhouse-connect`` over HTTP.

Every read sends ``readonly=1`` as a setting of its HTTP request, and a user's statement
the read limits too; the server applies them before the statement, whose own ``SETTINGS``
then cannot change them. A user's statement is first checked by ``sqlguard`` on the
server's own parse.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rllm.consumers.history.engine_base import EngineBase
from rllm.consumers.history.errors import translate_clickhouse_error
from rllm.consumers.history.limits import READ_ONLY, ReadLimits, limit_error
from rllm.consumers.history.types import HistoryError, QueryResult

__all__ = ["ServerStore"]


class ServerStore(EngineBase):
    """History in a ClickHouse server.

    Args:
        url: ``http://host:8123`` (or https).
        database: the database holding the tables.
        user: ClickHouse user.
        password: its password.
        limits: the read limits of a user's statement (``query_user``).

    Raises:
        HistoryError: if the server does not answer.
    """

    def __init__(
        self,
        url: str,
        database: str = "rllm",
        user: str = "default",
        password: str = "",
        limits: ReadLimits | None = None,
    ) -> None:
        import clickhouse_connect

        self.database = database
        self.limits = limits or ReadLimits()
        try:
            self._client: Any = clickhouse_connect.get_client(
                dsn=url,
                username=user,
                password=password,
                database="default",
                autogenerate_session_id=False,
            )
        except Exception as exc:  # clickhouse-connect raises OperationalError and friends
            raise HistoryError(f"cannot reach the ClickHouse server at {url}: {exc}") from exc

    def _insert(self, table: str, batch: pa.Table) -> None:
        """Send an Arrow batch to ``table`` (``insert_arrow``)."""
        try:
            self._client.insert_arrow(
                table, batch, database=self.database, settings={"optimize_on_insert": 0}
            )
        except Exception as exc:
            raise translate_clickhouse_error(exc, f"inserting into {table}") from exc

    def query(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a read query of ours (``readonly=1``) with server-side parameter binding."""
        try:
            tbl = self._client.query_arrow(sql, parameters=params or None, settings=READ_ONLY)
        except Exception as exc:
            raise translate_clickhouse_error(exc, "query failed") from exc
        return QueryResult.from_arrow(tbl)

    def _run_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a statement with ``readonly=1`` and the limits as request settings, unchecked
        (the guard's own parses)."""
        try:
            tbl = self._client.query_arrow(
                sql, parameters=params or None, settings=self.limits.settings()
            )
        except Exception as exc:
            raise (
                limit_error(str(exc), self.limits) or translate_clickhouse_error(exc, "sql")
            ) from exc
        return QueryResult.from_arrow(tbl)

    def command(self, sql: str) -> None:
        """Run a statement that returns nothing."""
        try:
            self._client.command(sql)
        except Exception as exc:
            raise translate_clickhouse_error(exc, "statement failed") from exc

    def close(self) -> None:
        """Close the HTTP pool."""
        self._client.close()
