"""How many Harbor tasks of a dataset pass ``bench check`` here, and why the others do
not; prints a row per problem kind, JSON last line.

Run: ``python perf/tasks.py DIR`` with DIR a folder of Harbor task folders, e.g.
Terminal-Bench 2 as skill-usage ships it (``yujianll/skill-usage`` at ``f9f89fad``,
folder ``terminal-bench-2/``: ``git --git-dir=... archive f9f89fad terminal-bench-2 | tar
-x -C /tmp/tb2``). Nothing is built: this is the static check only (every problem of every
task, each Dockerfile read to its end), so it is fast and needs no sandbox.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rllm.benchmarks.harbor import check_tasks  # noqa: E402


def _kind(problem: str) -> str:
    """A problem's kind: the image a FROM names, or its message without paths and lines."""
    found = re.search(r"names '([^']+)', not an image", problem)
    if found:
        return f"image {found.group(1)}"
    text = re.sub(r"/\S*Dockerfile:\d+", "Dockerfile:N", problem)
    return re.sub(r"\d+", "N", text)[:100]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", type=Path, help="a folder of Harbor task folders")
    args = parser.parse_args()
    started = time.monotonic()
    checks = check_tasks(args.tasks)
    took = time.monotonic() - started
    kinds = collections.Counter(_kind(p) for c in checks for p in c.problems)
    tasks_by_kind = collections.Counter(
        kind for c in checks for kind in {_kind(p) for p in c.problems}
    )
    valid = [c.name for c in checks if c.ok]
    print(f"{len(checks)} tasks, {len(valid)} pass bench check ({took:.2f} s)")
    for kind, count in tasks_by_kind.most_common():
        print(f"{count:5d} tasks  {kinds[kind]:5d} problems  {kind}")
    print(
        json.dumps(
            {
                "tasks": len(checks),
                "valid": len(valid),
                "valid_tasks": valid,
                "problems": sum(kinds.values()),
                "tasks_by_problem": dict(tasks_by_kind.most_common()),
                "check_s": round(took, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
