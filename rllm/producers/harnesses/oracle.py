"""The ``oracle`` harness: runs the task's ``solution/solve.sh`` (what a perfect agent
would do) and makes no model call. It proves a task solvable and its verifier right."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from rllm.benchmarks.harbor.task import HarborTask, HarborTaskError
from rllm.producers.harnesses.types import HarnessApi, HarnessBase

__all__ = ["SOLUTION_DIR", "OracleHarness"]

SOLUTION_DIR = "/solution"
"""Where the task's ``solution/`` is copied."""


class OracleHarness(HarnessBase):
    """Runs ``/solution/solve.sh`` with bash (sh where the image has no bash); it needs no
    install, no model and no log of its own."""

    name = "oracle"
    version = "1"
    api = HarnessApi.NONE

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """The task's ``solution/`` at ``/solution``.

        Raises:
            HarborTaskError: the task ships no ``solution/solve.sh``.
        """
        if task.solution_dir is None:
            raise HarborTaskError(
                f"Harbor task {task.name!r} has no oracle: "
                f"{task.path / 'solution' / 'solve.sh'} is missing"
            )
        return {SOLUTION_DIR: task.solution_dir}

    def command(self, workdir: str) -> str:
        """``solve.sh`` from the task's workdir, stdin closed."""
        script = shlex.quote(f"{SOLUTION_DIR}/solve.sh")
        return (
            f"cd {shlex.quote(workdir)} && if command -v bash >/dev/null 2>&1; "
            f"then bash {script}; else sh {script}; fi </dev/null"
        )
