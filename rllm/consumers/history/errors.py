"""Errors of the history area, and ClickHouse's errors (chDB or a server) mapped to them:
``clickhouse_errors`` does for the engines what ``rllm.kafka.kafka_errors`` does for
Kafka.

::

    RllmError
    └── HistoryError                      the history store failed
        ├── StoreLockedError              another process holds the chDB directory
        └── QueryError(ValueError)        a query or one of its parameters is bad
            └── StatementRefusedError     analytics SQL names what it may not (sqlguard)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from rllm.errors import RllmError

__all__ = [
    "QUERY_CODES",
    "HistoryError",
    "QueryError",
    "StatementRefusedError",
    "StoreLockedError",
    "clickhouse_errors",
    "translate_clickhouse_error",
]


class HistoryError(RllmError):
    """The history store could not do what was asked."""


class StoreLockedError(HistoryError):
    """Another process holds the chDB database directory."""


class QueryError(HistoryError, ValueError):
    """A query, or one of its parameters, is not acceptable; the message names which."""


class StatementRefusedError(QueryError):
    """A user's statement does what analytics SQL refuses (``sqlguard``).

    Args:
        kind: what was refused: ``function``, ``table function``, ``table``, ``clause``,
            ``statement`` or ``name``.
        name: the refused function, table, clause or statement kind, as ClickHouse read it.
        message: the whole message, with what to do.
    """

    def __init__(self, kind: str, name: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name


QUERY_CODES = frozenset(
    {
        "SYNTAX_ERROR",
        "BAD_QUERY_PARAMETER",
        "UNKNOWN_QUERY_PARAMETER",
        "UNKNOWN_IDENTIFIER",
        "UNKNOWN_TABLE",
        "ILLEGAL_TYPE_OF_ARGUMENT",
        "TYPE_MISMATCH",
        "CANNOT_PARSE_TEXT",
        "UNKNOWN_FUNCTION",
        "NUMBER_OF_ARGUMENTS_DOESNT_MATCH",
        "READONLY",
        "UNKNOWN_DATABASE",
        "CANNOT_PARSE_NUMBER",
        "CANNOT_PARSE_DATETIME",
        "UNKNOWN_TYPE",
    }
)
"""ClickHouse error codes that mean the query (or a parameter) is wrong, not the store."""


def translate_clickhouse_error(exc: BaseException, context: str) -> HistoryError:
    """Map a ClickHouse error (chDB or server) to a HistoryError; bad queries to QueryError."""
    text = str(exc).strip()
    match = re.search(r"\(([A-Z_]+)\)", text)
    code = match.group(1) if match else ""
    short = text.split(". Stack trace")[0][:600]
    cls = QueryError if code in QUERY_CODES else HistoryError
    return cls(f"{context}: {short}")


@contextmanager
def clickhouse_errors(
    context: str, catch: tuple[type[BaseException], ...] = (Exception,)
) -> Iterator[None]:
    """Re-raise ClickHouse's errors inside the block as HistoryErrors naming ``context``.

    Args:
        context: what was being done (``inserting 5 rows into steps``).
        catch: the foreign errors to translate: chDB raises ``RuntimeError``,
            clickhouse-connect its own ``Exception`` subclasses. Our own errors pass
            through unchanged.
    """
    try:
        yield
    except RllmError:
        raise
    except catch as exc:
        raise translate_clickhouse_error(exc, context) from exc
