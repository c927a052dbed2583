"""Where the viewer's reads go: the store ``rllm-cli analytics`` would use, held for no
longer than a page needs it.

A ClickHouse server or a running history service is held for the viewer's life. The chDB
directory itself (no service runs) is opened for each page and closed after it, one page at
a time: chDB lets one process hold a directory, and a viewer that kept it would stop
``rllm-cli history`` (and so a live run's events) from starting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rllm.consumers.history import HistorySettings, HistoryStore
from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.service import ServiceClient, open_store

__all__ = ["HistorySource", "StoreSource", "fixed_source"]

StoreSource = Callable[[], Any]
"""Called for each page: a context manager that yields the ``HistoryStore`` to read."""


def fixed_source(store: HistoryStore) -> StoreSource:
    """Always ``store`` (tests, or a caller that holds a store of its own)."""

    @contextmanager
    def use() -> Iterator[HistoryStore]:
        yield store

    return use


class HistorySource:
    """The store ``open_store(settings)`` gives, reopened when a held one stops answering
    and closed after each page when it is the chDB directory itself."""

    def __init__(self, settings: HistorySettings) -> None:
        self.settings = settings
        self._held: HistoryStore | None = None
        self._lock = threading.Lock()
        self._chdb = threading.Lock()

    def where(self) -> str:
        """The history it reads, in words (through the history service, when it holds one)."""
        if self.settings.clickhouse_url:
            return self.settings.clickhouse_url
        if isinstance(self._held, ServiceClient):
            return f"the history service on {self.settings.socket_path}"
        return str(self.settings.history_dir)

    @contextmanager
    def __call__(self) -> Iterator[HistoryStore]:
        with self._lock:
            held = self._held
            if isinstance(held, ServiceClient) and not held.ping():
                held.close()
                held = self._held = None
        if held is not None:
            yield held
            return
        with self._chdb:  # one page at a time may hold the directory
            store = open_store(self.settings)
            if not isinstance(store, ChdbStore):
                with self._lock:
                    if self._held is None:
                        self._held = store
                    else:
                        store.close()
                        store = self._held
                yield store
                return
            try:
                yield store
            finally:
                store.close()

    def close(self) -> None:
        """Close a held store."""
        with self._lock:
            if self._held is not None:
                self._held.close()
                self._held = None
