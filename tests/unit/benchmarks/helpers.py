"""Helpers of the benchmark tests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "benchmarks"
"""The folder of benchmark fixture files."""
