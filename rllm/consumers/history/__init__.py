"""History: every event in ClickHouse (chDB embedded, or a server), queryable for analytics."""

from __future__ import annotations

from rllm.consumers.history.queries import QUERIES, run_named, run_sql
from rllm.consumers.history.service import open_store, run_service
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.sink import HistorySink, SinkStats
from rllm.consumers.history.types import (
    HistoryError,
    HistoryStore,
    QueryError,
    QueryResult,
    StoreLockedError,
)

__all__ = [
    "QUERIES",
    "HistoryError",
    "HistorySettings",
    "HistorySink",
    "HistoryStore",
    "QueryError",
    "QueryResult",
    "SinkStats",
    "StoreLockedError",
    "open_store",
    "run_named",
    "run_service",
    "run_sql",
]
