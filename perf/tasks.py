"""How many Harbor tasks of a dataset pass ``bench check`` here, and why the others do
not; with ``--run``, how many environments build (cold and cached seconds), how many
oracles exit 0, how many verifiers run to a reward, the reward per task and a reason for
every task short of reward 1. A row per problem kind or task, JSON last line.

Run: ``python perf/tasks.py DIR`` with DIR a folder of Harbor task folders, e.g.
Terminal-Bench 2 as skill-usage ships it (``yujianll/skill-usage`` at ``f9f89fad``,
folder ``terminal-bench-2/``: ``git --git-dir=... archive f9f89fad terminal-bench-2 | tar
-x -C /tmp/tb2``). Without ``--run`` nothing is built: the static check only (every problem
of every task, each Dockerfile read to its end), fast and without a sandbox. ``--run``
builds each task's environment on the local backend twice (cold: the first build in this
store, base images included when the store lacks them; cached: the same build again), runs
``solution/solve.sh`` and the verifier; ``--limit N`` or ``--task NAME`` pick the tasks and
``--timeout-s`` bounds each one (building 89 environments on 2 cores takes hours).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rllm.benchmarks.harbor import (  # noqa: E402
    HarborTask,
    check_tasks,
    load_task,
    run_oracle,
    run_verifier,
)
from rllm.sandboxes import (  # noqa: E402
    OWNER_LABEL,
    ImageError,
    SandboxBackend,
    SandboxSettings,
    get_backend,
)
from rllm.sandboxes.images.resolve import parse_substitutes  # noqa: E402
from rllm.sandboxes.images.store import ImageStore  # noqa: E402

REACHABLE = "this machine's network reaches only the package registries"
_NO_HOST = [
    re.compile(p)
    for p in (
        r"Could not resolve host:? '?([\w.-]+\.[a-z]{2,})",
        r"Failed to connect to ([\w.-]+\.[a-z]{2,})",
        r"Temporary failure resolving '([\w.-]+)'",
        r"host='([\w.-]+)'.*(?:NameResolution|ConnectTimeout|Failed to establish)",
        r"dial tcp: lookup ([\w.-]+)",
        r"unable to access 'https?://([\w.-]+)",
        r"curl: \(\d+\) .*?([\w-]+\.[\w.-]*[a-z]{2,})",
    )
]
_NO_NETWORK = re.compile(
    r"Network is unreachable|Name or service not known|Temporary failure in name resolution"
)


def _kind(problem: str) -> str:
    """A problem's kind: the image a FROM names, or its message without paths and lines."""
    found = re.search(r"names '([^']+)', not an image", problem)
    if found:
        return f"image {found.group(1)}"
    text = re.sub(r"/\S*Dockerfile:\d+", "Dockerfile:N", problem)
    return re.sub(r"\d+", "N", text)[:100]


def network_reason(text: str) -> str | None:
    """Why ``text`` (a command's output) failed for want of the network, naming the host
    when it says which; None when it does not look like that."""
    hosts = [m.group(1) for p in _NO_HOST for m in p.finditer(text)]
    if hosts:
        return f"no network to {', '.join(dict.fromkeys(hosts))} ({REACHABLE})"
    if _NO_NETWORK.search(text):
        return f"a host it names could not be reached ({REACHABLE})"
    return None


async def run_task(backend: SandboxBackend, task: HarborTask, row: dict[str, Any]) -> None:
    """Build ``task``'s environment twice, run its oracle and verifier; fill ``row`` as it
    goes, so a timeout keeps what was measured."""
    tag = f"perf-tasks/{task.path.name}"
    for key in ("cold_s", "cached_s"):
        began = time.monotonic()
        row["step"] = "build"
        image = await backend.build_image(task.environment_dir, tag)
        row[key] = round(time.monotonic() - began, 2)
    row["built"] = True
    row["step"] = "oracle"
    spec = task.sandbox_spec(image.name, labels={OWNER_LABEL: "perf-tasks"})
    sandbox = await backend.create(spec)
    try:
        solved = await run_oracle(sandbox, task)
        row["oracle_exit"] = solved.exit_code
        oracle_out = solved.stdout + solved.stderr + (solved.error or "")
        row["step"] = "verifier"
        verified = await run_verifier(sandbox, task)
    finally:
        await sandbox.close()
    row["verifier_exit"], row["reward"] = verified.exit_code, verified.reward
    if verified.reward is not None and verified.reward >= 1.0:
        return
    row["reason"] = shortfall(
        verified.reward, verified.error, verified.stdout_tail, solved.exit_code, oracle_out
    )


def shortfall(
    reward: float | None, error: str | None, test_out: str, oracle_exit: int | None, oracle_out: str
) -> str:
    """Why a task got ``reward`` (< 1 or None): the oracle's failure and the verifier's,
    each with the host it could not reach when its output names one."""
    parts = []
    if oracle_exit != 0:
        said = network_reason(oracle_out) or f"its output ends {oracle_out.strip()[-200:]!r}"
        parts.append(f"solve.sh exited {oracle_exit}: {said}")
    net = network_reason(test_out)
    if reward is None:
        parts.append(f"verifier gave no reward: {error}" + (f"; {net}" if net else ""))
    elif net:
        parts.append(f"verifier: {net}")
    elif not parts:
        parts.append(f"test output ends {test_out.strip()[-300:]!r}")
    head = "no reward" if reward is None else f"reward {reward:g}"
    return f"{head}: " + "; ".join(parts)


async def run_tasks(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per task picked: build, oracle, verifier, reward and reason."""
    names = args.task or [p.name for c in check_tasks(args.tasks) for p in [args.tasks / c.name]]
    names = names[: args.limit] if args.limit else names
    substitutes = parse_substitutes(tuple(args.image_substitute))
    settings = SandboxSettings(image_substitutes=substitutes)
    backend = get_backend("local", settings)
    rows = []
    try:
        for name in names:
            row: dict[str, Any] = {
                "task": name,
                "built": False,
                "oracle_exit": None,
                "verifier_exit": None,
                "reward": None,
            }
            rows.append(row)
            began = time.monotonic()
            try:
                task = load_task(args.tasks / name)
                await asyncio.wait_for(run_task(backend, task, row), args.timeout_s)
            except TimeoutError:
                row["reason"] = f"ran past --timeout-s {args.timeout_s:g} s in its {row['step']}"
            except Exception as exc:  # the task's own failure, named; the others go on
                text = f"{type(exc).__name__}: {exc}"
                said = network_reason(text)
                row["reason"] = f"{row.get('step', 'load')} failed: {text[:400]}" + (
                    f"; {said}" if said else ""
                )
            row.pop("step", None)
            row["s"] = round(time.monotonic() - began, 1)
            if args.drop_images:
                _drop(ImageStore(settings.images_dir), f"perf-tasks/{name}")
            print(
                f"{name}: built {row['built']} cold {row.get('cold_s')} s cached "
                f"{row.get('cached_s')} s, oracle exit {row['oracle_exit']}, verifier exit "
                f"{row['verifier_exit']}, reward {row['reward']}"
                + (f"; {row['reason']}" if "reason" in row else ""),
                flush=True,
            )
    finally:
        await backend.aclose()
    return rows


def _drop(store: ImageStore, name: str) -> None:
    """Delete image ``name`` (if it was built) and every layer no image uses any more."""
    with contextlib.suppress(ImageError):
        store.delete(name)
    store.prune()


def run_figures(rows: list[dict[str, Any]], substitutes: list[str]) -> dict[str, Any]:
    """The ``--run`` figures of ``rows``."""
    built = [r for r in rows if r["built"]]
    return {
        "ran": [r["task"] for r in rows],
        "image_substitutes": substitutes,
        "built": len(built),
        "cold_s": sorted(r["cold_s"] for r in built),
        "cached_s": sorted(r["cached_s"] for r in built),
        "oracle_exit_0": sum(r["oracle_exit"] == 0 for r in rows),
        "verifier_reward": sum(r["reward"] is not None for r in rows),
        "reward_1": sum(r["reward"] == 1.0 for r in rows),
        "rewards": {r["task"]: r["reward"] for r in rows},
        "reasons": {r["task"]: r["reason"] for r in rows if "reason" in r},
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", type=Path, help="a folder of Harbor task folders")
    parser.add_argument("--run", action="store_true", help="build, run the oracle and verify")
    parser.add_argument("--task", action="append", help="run this task (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="run the first N tasks only")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per task (default 900)")
    parser.add_argument("--image-substitute", action="append", default=[], metavar="FROM=TO")
    parser.add_argument(
        "--drop-images",
        action="store_true",
        help="delete each task's image and prune its layers once it ran (89 TB2 images take "
        "~80 GB; base images stay)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    checks = check_tasks(args.tasks, substitutes=parse_substitutes(args.image_substitute) or None)
    took = time.monotonic() - started
    kinds = collections.Counter(_kind(p) for c in checks for p in c.problems)
    tasks_by_kind = collections.Counter(
        kind for c in checks for kind in {_kind(p) for p in c.problems}
    )
    valid = [c.name for c in checks if c.ok]
    print(f"{len(checks)} tasks, {len(valid)} pass bench check ({took:.2f} s)")
    for kind, count in tasks_by_kind.most_common():
        print(f"{count:5d} tasks  {kinds[kind]:5d} problems  {kind}")
    figures: dict[str, Any] = {
        "tasks": len(checks),
        "valid": len(valid),
        "valid_tasks": valid,
        "problems": sum(kinds.values()),
        "tasks_by_problem": dict(tasks_by_kind.most_common()),
        "check_s": round(took, 3),
    }
    if args.run:
        rows = asyncio.run(run_tasks(args))
        figures.update(run_figures(rows, args.image_substitute))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
