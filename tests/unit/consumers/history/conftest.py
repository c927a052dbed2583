"""Fixtures: a store per engine available (chDB always; a server with RLLM_TEST_CLICKHOUSE_URL)
and a generated 20k-step history.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from rllm.consumers.history.types import HistoryStore
from tests.unit.consumers.history.shared import fresh_chdb, load

ENGINES = ["chdb"] + (["server"] if os.environ.get("RLLM_TEST_CLICKHOUSE_URL") else [])


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest) -> Iterator[HistoryStore]:
    """An empty history on each available engine."""
    if request.param == "chdb":
        yield fresh_chdb()
        return
    from rllm.consumers.history.engine_server import ServerStore

    server = ServerStore(os.environ["RLLM_TEST_CLICKHOUSE_URL"], f"t_{uuid.uuid4().hex[:10]}")
    server.create_schema()
    try:
        yield server
    finally:
        server.command(f"DROP DATABASE IF EXISTS `{server.database}`")
        server.close()


@pytest.fixture(scope="module")
def history_20k() -> HistoryStore:
    """A chDB history of 20k generated steps, shared by a module's tests."""
    st = fresh_chdb("h20k")
    load(st, 20_000)
    return st
