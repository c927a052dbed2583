"""``clickhouse_errors`` on the real chDB engine: a bad query becomes a QueryError naming
the context and ClickHouse's reason, another engine failure a HistoryError, and our own
errors pass through unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rllm.consumers.history.errors import (
    HistoryError,
    QueryError,
    StoreLockedError,
    clickhouse_errors,
)
from tests.unit.consumers.history.shared import shared_chdb


@pytest.fixture
def session() -> Iterator[Any]:
    """A raw chDB session on the process's history directory (as the engine opens)."""
    from chdb import session as chdb_session

    sess = chdb_session.Session(str(shared_chdb().path))  # type: ignore[no-untyped-call]  # chdb ships no type hints
    try:
        yield sess
    finally:
        sess.close()


@pytest.mark.parametrize(
    ("sql", "code"),
    [("SELEC 1", "SYNTAX_ERROR"), ("SELECT * FROM nowhere.none", "UNKNOWN_DATABASE")],
)
def test_a_bad_query_is_a_query_error_naming_the_context_and_the_code(
    session: Any, sql: str, code: str
) -> None:
    with pytest.raises(QueryError) as raised, clickhouse_errors("probing the history"):
        session.query(sql, "CSV")
    text = str(raised.value)
    assert text.startswith("probing the history: ") and f"({code})" in text
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert isinstance(raised.value, ValueError)


def test_a_failure_of_the_engine_is_a_history_error_not_a_query_error(session: Any) -> None:
    with pytest.raises(HistoryError) as raised, clickhouse_errors("checking"):
        session.query("SELECT throwIf(1, 'the engine gave up')", "CSV")
    assert type(raised.value) is HistoryError
    assert str(raised.value).startswith("checking: ") and "the engine gave up" in str(raised.value)


def test_our_own_errors_and_uncaught_kinds_pass_through() -> None:
    locked = StoreLockedError("held by another process")
    with pytest.raises(StoreLockedError) as raised, clickhouse_errors("opening"):
        raise locked
    assert raised.value is locked
    with pytest.raises(KeyError), clickhouse_errors("opening", catch=(RuntimeError,)):
        raise KeyError("not a ClickHouse error")
