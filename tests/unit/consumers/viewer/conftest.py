"""Fixtures: one filled history per module (the synthetic history and ``AGENT_RUN``, as the
sink writes them) and a client of the viewer over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from rllm.consumers.history.types import HistoryStore
from rllm.consumers.viewer import ViewerSettings, create_app, fixed_source
from tests.unit.consumers.history.shared import fresh_chdb
from tests.unit.consumers.viewer.history import fill


@pytest.fixture(scope="module")
def history() -> HistoryStore:
    """A chDB history of 2000 synthetic steps and the agent run's three sessions."""
    store = fresh_chdb("view")
    fill(store, 2000)
    return store


@pytest.fixture(scope="module")
def client(history: HistoryStore) -> Iterator[TestClient]:
    """The viewer over ``history``, as a browser on this machine reaches it."""
    settings = ViewerSettings(live_window_s=3600)  # the open session was written at fill
    app = create_app(fixed_source(history), settings, where="the test history")
    with TestClient(app, base_url="http://127.0.0.1:8500") as c:
        yield c
