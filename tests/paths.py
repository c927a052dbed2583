"""Where the repository and the test tree are, for tests that read files beside them (so a
test's place in the tree is not spelled as a count of parent folders)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BENCHMARK_FIXTURES", "FIXTURES", "HARBOR_TASKS", "ROOT", "TESTS"]

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
HARBOR_TASKS = FIXTURES / "harbor_tasks"
BENCHMARK_FIXTURES = FIXTURES / "benchmarks"
