"""Fixtures of the benchmark tests: the fixture folder and a task factory."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rllm.schemas.types import Task
from tests.paths import BENCHMARK_FIXTURES as FIXTURES


@pytest.fixture
def fixtures() -> Path:
    """The folder of benchmark fixture files."""
    return FIXTURES


@pytest.fixture
def make_task() -> Callable[..., Task]:
    """Build a task with a ground truth and metadata."""

    def build(truth: Any, reward_fn: str = "exact_match", **metadata: Any) -> Task:
        return Task(
            task_id="t1",
            instruction="q",
            ground_truth_json=json.dumps(truth),
            reward_fn=reward_fn,
            benchmark="test",
            metadata_json=json.dumps(metadata),
        )

    return build


@pytest.fixture(autouse=True)
def _no_downloads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never reach a hub and never touch the user's cache."""
    monkeypatch.setenv("RLLM_BENCH_OFFLINE", "1")
    monkeypatch.setenv("RLLM_BENCH_CACHE_DIR", str(tmp_path / "bench-cache"))
