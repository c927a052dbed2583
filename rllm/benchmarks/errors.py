"""Errors of the benchmarks area, under the project's root ``RllmError``.

::

    RllmError
    └── BenchmarkError
        ├── UnknownBenchmarkError(KeyError)      a name no entry or alias matches
        ├── UnknownRewardFnError(KeyError)       a name no reward function is registered as
        ├── NameTakenError(ValueError)           a name registered twice (entry, alias, grader)
        ├── DatasetRowError(ValueError)          a row lacks a mapped field or has a bad value
        ├── DatasetUnavailableError(LookupError) not cached, not given, and not downloadable
        ├── GradingError(ValueError)             a task or reply a reward function cannot score
        ├── HarborTaskError(ValueError)          a Harbor task directory that cannot be used
        ├── RewardFileError(ValueError)          test.sh wrote no reward file, or a bad one
        └── CodeSandboxError(RuntimeError)       the code sandbox cannot run here
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = [
    "BenchmarkError",
    "CodeSandboxError",
    "DatasetRowError",
    "DatasetUnavailableError",
    "GradingError",
    "HarborTaskError",
    "NameTakenError",
    "RewardFileError",
    "UnknownBenchmarkError",
    "UnknownRewardFnError",
]


class BenchmarkError(RllmError):
    """Root of the benchmark registry's, loaders' and graders' errors."""


class UnknownBenchmarkError(BenchmarkError, KeyError):
    """A benchmark name that no registry entry or alias matches."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownRewardFnError(BenchmarkError, KeyError):
    """A reward function name that nothing is registered as."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class NameTakenError(BenchmarkError, ValueError):
    """A benchmark name or alias, or a reward function name, registered a second time."""


class DatasetRowError(BenchmarkError, ValueError):
    """A dataset row lacks a mapped field, or a field has a value the entry cannot use."""


class DatasetUnavailableError(BenchmarkError, LookupError):
    """The dataset is neither given, nor cached, nor downloadable from here."""


class GradingError(BenchmarkError, ValueError):
    """A task or an answer a reward function cannot score: no ground truth, a truth of an
    unknown kind, an instruction with no checker, a judge reply with no verdict."""


class CodeSandboxError(BenchmarkError, RuntimeError):
    """The code sandbox (bubblewrap, prlimit) is missing or failed to start."""


class HarborTaskError(BenchmarkError, ValueError):
    """A task directory that cannot be used: the message names the task, the file and
    every problem found in it."""


class RewardFileError(BenchmarkError, ValueError):
    """A Harbor verifier's reward file is missing, empty, or not finite numbers; the
    message names the file and what it holds."""
