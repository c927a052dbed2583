"""The embedded engine: chDB, the ClickHouse engine in this process, persisted on disk.

chDB allows one process per database directory and one open directory per process, so
``ChdbStore`` is meant to be held by the history service; the CLI opens one only when no
service answers on the socket. Writes go through one session; reads through sessions of
their own on the same directory, opened with ``readonly=1`` (and, for a user's statement,
the read limits) in their connection string, so no statement can undo them; a user's
statement is first checked by ``sqlguard`` on that session's own parse. Each session's
calls are serialised with its own lock, so a long read never holds up an insert.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa

from rllm.consumers.history.engine_base import EngineBase
from rllm.consumers.history.errors import translate_clickhouse_error
from rllm.consumers.history.limits import READ_ONLY, ReadLimits, limit_error
from rllm.consumers.history.types import HistoryError, QueryError, QueryResult, StoreLockedError

__all__ = ["ChdbStore", "arrow_stream_bytes", "translate_clickhouse_error"]


def arrow_stream_bytes(batch: pa.Table) -> bytes:
    """Serialise an Arrow table in the Arrow IPC stream format."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_table(batch)
    return sink.getvalue()


def _result(tbl: Any) -> QueryResult:
    return QueryResult.from_arrow(tbl) if isinstance(tbl, pa.Table) else QueryResult(())


class _Reader:
    """One read-only chDB session on the open directory, opened on first use."""

    def __init__(self, path: Path, settings: dict[str, int | str]) -> None:
        self.conn = f"{path}?{urlencode(settings)}"
        self.lock = threading.Lock()
        self.session: Any = None

    def query(self, sql: str, params: dict[str, Any] | None) -> Any:
        from chdb import session

        with self.lock:
            if self.session is None:
                self.session = session.Session(self.conn)  # type: ignore[no-untyped-call]  # chdb is untyped
            try:
                return self.session.query(sql, "ArrowTable", params=params or None)
            except RuntimeError:
                # chDB 4.4 leaves a failed query's output behind (timeout, throwIf): the
                # session's next Arrow result would not decode. A fresh session is clean.
                self._reset()
                raise
            except (pa.ArrowException, OSError, ValueError) as exc:
                self._reset()
                raise QueryError(
                    f"sql: the result is not the Arrow table asked for ({exc}); "
                    f"a FORMAT clause in the statement?"
                ) from exc

    def _reset(self) -> None:
        self.session.close()
        self.session = None

    def close(self) -> None:
        with self.lock:
            if self.session is not None:
                self.session.close()
                self.session = None


class ChdbStore(EngineBase):
    """History in a chDB directory.

    Args:
        path: the database directory (created if missing).
        database: the database holding the tables.
        limits: the read limits of a user's statement (``query_user``).

    Raises:
        StoreLockedError: if another process holds ``path``.
    """

    def __init__(
        self, path: Path, database: str = "rllm", limits: ReadLimits | None = None
    ) -> None:
        from chdb import session

        self.path = Path(path)
        self.database = database
        self.limits = limits or ReadLimits()
        if "?" in str(self.path):
            raise HistoryError(f"history_dir: chDB cannot open a path with '?' in it: {path}")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._owner = True
        try:
            self._session: Any = session.Session(str(self.path))  # type: ignore[no-untyped-call]  # chdb is untyped
        except RuntimeError as exc:
            raise StoreLockedError(
                f"cannot open the chDB history at {self.path}: another process holds it "
                f"(a running `rllm-cli history`?); query through that service or stop it "
                f"[{str(exc)[:200]}]"
            ) from exc
        self._reader = _Reader(self.path, READ_ONLY)
        self._user_reader = _Reader(self.path, self.limits.settings())

    @contextmanager
    def _errors(self, context: str) -> Iterator[None]:
        try:
            with self._lock:
                yield
        except RuntimeError as exc:
            raise translate_clickhouse_error(exc, context) from exc

    def _insert(self, table: str, batch: pa.Table) -> None:
        """Stream an Arrow batch into ``table`` as ArrowStream."""
        data = arrow_stream_bytes(batch)
        cols = ", ".join(f"`{c}`" for c in batch.column_names)
        sql = f"INSERT INTO `{self.database}`.`{table}` ({cols}) SETTINGS optimize_on_insert = 0"
        with self._errors(f"inserting {batch.num_rows} rows into {table}"):
            inserter = self._session.send_insert(sql, "ArrowStream")
            inserter.append(data)
            inserter.finish()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a read query of ours in the read-only session; parameters are bound by chDB,
        never pasted into the SQL."""
        try:
            tbl = self._reader.query(sql, params)
        except RuntimeError as exc:
            raise translate_clickhouse_error(exc, "query failed") from exc
        return _result(tbl)

    def _run_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a statement in the session opened with ``readonly=1`` and the limits,
        unchecked (the guard's own parses)."""
        try:
            tbl = self._user_reader.query(sql, params)
        except RuntimeError as exc:
            raise (
                limit_error(str(exc), self.limits) or translate_clickhouse_error(exc, "sql")
            ) from exc
        return _result(tbl)

    def command(self, sql: str) -> None:
        """Run a statement that returns nothing."""
        with self._errors(f"statement failed ({sql.split(None, 3)[:3]})"):
            self._session.query(sql, "CSV")

    def view(self, database: str) -> ChdbStore:
        """The same open directory seen through another database (closing it is a no-op)."""
        other = object.__new__(ChdbStore)
        other.path, other.database, other._lock = self.path, database, self._lock
        other._session, other._owner, other.limits = self._session, False, self.limits
        other._reader, other._user_reader = self._reader, self._user_reader
        return other

    def close(self) -> None:
        """Close the sessions and release the directory."""
        if not self._owner:
            return
        self._user_reader.close()
        self._reader.close()
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
