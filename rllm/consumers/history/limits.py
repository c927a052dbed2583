"""The read path's ClickHouse settings: ``readonly=1`` and the limits on a user's statement.

Both engines apply them outside the statement: chDB in the connection string of a reading
session of its own, the ClickHouse server as per-query settings sent by clickhouse-connect.
``readonly=1`` then forbids the statement from changing any of them (its ``SETTINGS`` clause
and ``SET`` are refused with READONLY).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rllm.consumers.history.types import QueryError

__all__ = ["READ_ONLY", "ReadLimits", "limit_error"]

READ_ONLY: dict[str, int | str] = {"readonly": 1}
"""Settings of every read: our own queries (named, replay) and the history service's API."""

# ClickHouse error code -> (what the limit bounds, ReadLimits field it comes from)
_LIMIT_CODES = {
    "TIMEOUT_EXCEEDED": ("execution time", "max_execution_s"),
    "TOO_MANY_ROWS": ("rows read", "max_rows_to_read"),
    "TOO_MANY_ROWS_OR_BYTES": ("result size", "max_result_rows"),
    "MEMORY_LIMIT_EXCEEDED": ("memory", "max_memory_bytes"),
}


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on one user-written statement (``analytics sql``, the viewer)."""

    max_execution_s: int = 60
    """Wall-clock seconds (``max_execution_time``)."""
    max_rows_to_read: int = 1_000_000_000
    """Rows read from tables and table functions (``max_rows_to_read``)."""
    max_memory_bytes: int = 2 * 1024**3
    """Memory of the query (``max_memory_usage``)."""
    max_result_rows: int = 1_000_000
    """Rows in the result (``max_result_rows``)."""
    max_result_bytes: int = 256 * 1024**2
    """Bytes of the result, uncompressed (``max_result_bytes``)."""

    def settings(self) -> dict[str, int | str]:
        """The ClickHouse settings: ``readonly=1``, the limits, and ``throw`` on overflow."""
        return {
            **READ_ONLY,
            "max_execution_time": self.max_execution_s,
            "timeout_overflow_mode": "throw",
            "max_rows_to_read": self.max_rows_to_read,
            "read_overflow_mode": "throw",
            "max_memory_usage": self.max_memory_bytes,
            "max_result_rows": self.max_result_rows,
            "max_result_bytes": self.max_result_bytes,
            "result_overflow_mode": "throw",
        }

    def env_name(self, field: str) -> str:
        """The environment variable that sets ``field`` (``HistorySettings``)."""
        return "RLLM_HISTORY_SQL_" + field.upper()


def limit_error(text: str, limits: ReadLimits) -> QueryError | None:
    """A clear error for a statement stopped by a read limit or by ``readonly``; else None.

    Args:
        text: ClickHouse's error text (it ends with the code in parentheses).
        limits: the limits the statement ran under.
    """
    short = text.split(". Stack trace")[0].strip()
    codes = re.findall(r"\(([A-Z_]+)\)", short)
    code = codes[-1] if codes else ""
    short = short[:400]
    if code == "READONLY":
        return QueryError(
            f"sql: refused by ClickHouse's read-only mode (readonly=1, set by the session): "
            f"the statement would write, change a setting or reach outside the history [{short}]"
        )
    if code not in _LIMIT_CODES:
        return None
    what, field = _LIMIT_CODES[code]
    if code == "TOO_MANY_ROWS_OR_BYTES" and "max bytes" in short:
        field = "max_result_bytes"
    value = getattr(limits, field)
    return QueryError(
        f"sql: stopped by the read limit on {what} ({field} = {value:_}, "
        f"{limits.env_name(field)}); narrow the statement (WHERE, LIMIT, fewer columns) "
        f"or raise the limit [{short}]"
    )
