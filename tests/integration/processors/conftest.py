"""Fixtures of the processor integration tests (their helpers are in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rllm.settings import KafkaSettings
from tests.integration.processors.helpers import Workers


@pytest.fixture
def workers(kafka: KafkaSettings, tmp_path: Path) -> Iterator[Workers]:
    """Worker subprocesses for this test (killed at teardown)."""
    w = Workers(kafka, tmp_path)
    yield w
    w.close()
