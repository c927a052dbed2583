"""Errors of the benchmarks area, under the project's root ``RllmError``.

::

    RllmError
    └── BenchmarkError
        ├── UnknownBenchmarkError(KeyError)      a name no entry or alias matches
        ├── DatasetRowError(ValueError)          a row lacks a mapped field or has a bad value
        ├── DatasetUnavailableError(LookupError) not cached, not given, and not downloadable
        ├── HarborTaskError(ValueError)          a Harbor task directory that cannot be used
        └── CodeSandboxError(RuntimeError)       the code sandbox cannot run here
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = [
    "BenchmarkError",
    "CodeSandboxError",
    "DatasetRowError",
    "DatasetUnavailableError",
    "HarborTaskError",
    "UnknownBenchmarkError",
]


class BenchmarkError(RllmError):
    """Root of the benchmark registry's, loaders' and graders' errors."""


class UnknownBenchmarkError(BenchmarkError, KeyError):
    """A benchmark name that no registry entry or alias matches."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DatasetRowError(BenchmarkError, ValueError):
    """A dataset row lacks a mapped field, or a field has a value the entry cannot use."""


class DatasetUnavailableError(BenchmarkError, LookupError):
    """The dataset is neither given, nor cached, nor downloadable from here."""


class CodeSandboxError(BenchmarkError, RuntimeError):
    """The code sandbox (bubblewrap, prlimit) is missing or failed to start."""


class HarborTaskError(BenchmarkError, ValueError):
    """A task directory that cannot be used: the message names the task, the file and
    every problem found in it."""
