"""Helpers of the history tests: one chDB directory per test process (chDB opens one path
per process), each test with its own database in it, and ``load`` of a synthetic history.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rllm.consumers.history.batch import RowBuffer
from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.limits import ReadLimits
from rllm.consumers.history.rows import event_rows
from rllm.consumers.history.service import serve_queries
from rllm.consumers.history.types import HistoryStore
from tests.unit.consumers.history.synthetic import synthetic_events

_STORE: ChdbStore | None = None


def shared_chdb() -> ChdbStore:
    """The process's chDB store, opened on first use and closed at exit."""
    global _STORE
    if _STORE is None:
        path = Path(tempfile.mkdtemp(prefix="rllm-chdb-"))
        _STORE = ChdbStore(path, "default")
        atexit.register(
            lambda: (_STORE.close() if _STORE else None, shutil.rmtree(path, ignore_errors=True))
        )
    return _STORE


def fresh_chdb(prefix: str = "t") -> ChdbStore:
    """A view of the shared store on a new database with the history schema."""
    view = shared_chdb().view(f"{prefix}_{uuid.uuid4().hex[:10]}")
    view.create_schema()
    return view


def load(store: HistoryStore, n_steps: int, tokens_per_step: int = 0) -> RowBuffer:
    """Insert a synthetic history of ``n_steps`` steps; return the buffer it came from."""
    buf = RowBuffer()
    for i, (name, datum) in enumerate(synthetic_events(n_steps, tokens_per_step=tokens_per_step)):
        buf.extend(event_rows(name, datum, ("synthetic", 0, i)))
    for table, batch in buf.batches():
        store.insert(table, batch)
    return buf


@contextmanager
def limited_chdb(prefix: str, n_steps: int, limits: ReadLimits) -> Iterator[ChdbStore]:
    """A synthetic history of ``n_steps`` steps on a fresh database, read through a second
    store on the shared directory with ``limits`` (closed at the end)."""
    view = fresh_chdb(prefix)
    load(view, n_steps)
    store = ChdbStore(shared_chdb().path, view.database, limits)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def serving(sock: Path, store: HistoryStore) -> Iterator[dict[str, str]]:
    """The query service of ``store`` on ``sock`` (stopped at the end); yields the
    environment in which a command reads the history through it."""
    server = serve_queries(sock, store)
    try:
        yield {
            "RLLM_HISTORY_SOCKET": str(sock),
            "RLLM_HISTORY_DATABASE": store.database,
            "RLLM_CLICKHOUSE_URL": "",
        }
    finally:
        server.stop()
