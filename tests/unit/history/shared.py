"""One chDB directory per test process (chDB opens one path per process); each test gets
its own database in it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from pathlib import Path

from rllm.consumers.history.engine_chdb import ChdbStore

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
