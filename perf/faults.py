"""The fault table: each fault injected while steps flow, then everything counted end to end.

For each fault a fresh broker (the three-node cluster for ``broker-kill``) starts in a
temporary directory with every stage in its own process: the gateway (``capture=ack``) in
front of the deterministic fake upstream, an ``rllm-cli process`` worker, the history
service (chDB) and the trainer (the local backend on a tiny random model, recording the
episode ids it trained in its checkpoints). The driver runs groups of rollouts through the
gateway with the SDK (a few chat steps and a reward each, a wave of sessions at a time)
while the script injects the fault. Then each step sent is followed through the history,
the trajectories, the episodes and the trained episode ids: ``lost`` counts the steps
missing anywhere, ``duplicated`` the copies left after dedup by ``event_id``, and
``episodes_equal`` says whether the episodes (ids, rewards, advantages, step token IDs)
and the trained ids are those of a fault-free run of the same input, run first.

    python perf/faults.py [--faults broker-kill,trainer-kill] [--sessions 256] [--short]

Prints a row per fault; the last line is JSON: ``{"faults": [{"fault", "steps_sent",
"lost", "duplicated", "episodes_equal", "seconds", ...}, ...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.upstream import start_fake_upstream
from tests.faults.drive import Load, Progress, drive
from tests.faults.faults import FAULTS, Fault, FaultRun
from tests.faults.stack import ADMIN_KEY, Stack
from tests.faults.tally import STAGES, Counts, settle, tally
from tests.faults.trainer_proc import BATCH

__all__ = ["main"]


@dataclass(frozen=True)
class Sizes:
    """How big a run is, and how long the single broker stays away."""

    load: Load
    outage_s: float
    settle_s: float
    """Longest wait for every stage to settle after the drive."""


def sizes(sessions: int | None, short: bool) -> Sizes:
    """The default sizes, or ``--short``'s for CI; ``sessions`` overrides the count."""
    group = 4
    n = sessions or (64 if short else 256)
    tasks = n // group
    if tasks < BATCH or tasks % BATCH:
        raise SystemExit(
            f"--sessions {n}: need a multiple of {group * BATCH} (groups of {group}, "
            f"{BATCH} episodes per update), e.g. {max(tasks // BATCH, 1) * BATCH * group}"
        )
    if short:
        return Sizes(Load(tasks, group, steps=3, wave=16, think_s=0.5), 10.0, 60.0)
    return Sizes(Load(tasks, group, steps=3, wave=32, think_s=1.5), 60.0, 120.0)


def run_row(fault: Fault, size: Sizes, upstream_url: str, work: Path) -> dict[str, Any]:
    """Start a fresh stack, drive the load while injecting ``fault``, count."""
    stack = Stack(work / fault.name, fault.brokers, upstream_url, work / "model")
    run = FaultRun(stack, size.load, Progress(), size.outage_s, work / fault.name)
    t0 = time.monotonic()
    try:
        stack.start(*fault.start_args(run))
        started_s = time.monotonic() - t0
        errors: list[str] = []

        def driver() -> None:
            try:
                asyncio.run(
                    drive(size.load, stack.gateway_url, ADMIN_KEY, run.progress, fault.between(run))
                )
            except Exception as exc:  # reported in the row
                errors.append(f"driver: {type(exc).__name__}: {exc}")
                run.progress.finish()

        thread = threading.Thread(target=driver, name="driver")
        t1 = time.monotonic()
        thread.start()
        injected = True
        try:
            note = fault.inject(run)
        except Exception as exc:  # the row says the fault could not be injected
            injected, note = False, f"NOT INJECTED: {type(exc).__name__}: {exc}"
        thread.join()
        drive_s = time.monotonic() - t1
        took = settle(stack, size.load, size.settle_s)
        errors += [
            f"{s.name} exited by itself (code {s.proc.returncode}): ...{s.log(600)}"
            for s in stack.services()
            if s.crashed and s.proc is not None
        ]
        errors += [  # a faust agent that crashed stops consuming; its worker lives on
            f"{s.name}: {line.strip()[:300]}"
            for s in stack.workers
            for line in s.grep("Crashed reason=")
        ]
        seconds = time.monotonic() - t1
        counts = tally(stack, run.progress)
        counts.failures += errors
    finally:
        stack.close()
    return {
        "counts": counts,
        "note": note,
        "injected": injected,
        "settled_s": took,
        "drive_s": round(drive_s, 1),
        "seconds": round(seconds, 1),
        "startup_s": round(started_s, 1),
        "logs": str(stack.logs),
    }


def row_json(name: str, row: dict[str, Any], ref: Counts) -> dict[str, Any]:
    """The JSON of one row, compared with the reference run."""
    counts: Counts = row["counts"]
    return {
        "fault": name,
        "steps_sent": counts.steps_sent,
        "lost": counts.lost,
        "duplicated": counts.duplicated,
        "episodes_equal": counts.digest == ref.digest and counts.trained == ref.trained,
        "seconds": row["seconds"],
        "injected": row["injected"],
        "stages": counts.stages,
        "resent": counts.resent,
        "settled_s": row["settled_s"],
        "startup_s": row["startup_s"],
        "drive_s": row["drive_s"],
        "failures": counts.failures[:5],
        "note": row["note"],
    }


def failed_row(name: str, load: Load, why: str) -> dict[str, Any]:
    """The row of a fault whose run broke off: nothing counts as delivered."""
    return {
        "fault": name,
        "steps_sent": 0,
        "lost": load.total_steps,
        "duplicated": 0,
        "episodes_equal": False,
        "seconds": 0.0,
        "injected": False,
        "stages": dict.fromkeys(STAGES, 0),
        "resent": {},
        "settled_s": {},
        "startup_s": 0.0,
        "drive_s": 0.0,
        "failures": [why[:2000]],
        "note": "the run broke off",
    }


def print_row(out: dict[str, Any]) -> None:
    """One line per fault, then what it did."""
    s = out["stages"]
    print(
        f"{out['fault']:17s} sent {out['steps_sent']:5d}  lost {out['lost']:4d}  "
        f"dup {out['duplicated']:3d}  equal {out['episodes_equal']!s:5s}  "
        f"{out['seconds']:6.1f} s | history {s['history_steps']} steps, trajectories "
        f"{s['trajectories']}, episodes {s['episodes']} ({s['partial']} partial), trained "
        f"{s['trained']}; re-sent {out['resent']}",
        flush=True,
    )
    print(f"{'':17s} {out['note']}", flush=True)
    took = ", ".join(
        f"{k} {'never' if v is None else f'{v} s'}" for k, v in out["settled_s"].items()
    )
    print(
        f"{'':17s} startup {out['startup_s']} s, drive {out['drive_s']} s, then settled: {took}",
        flush=True,
    )
    for what in out["failures"]:
        print(f"{'':17s} {what}", flush=True)


def main() -> None:
    """Run the reference and each fault; print the table and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--faults",
        default=",".join(n for n in FAULTS if n != "none"),
        help="comma-separated, in order [all]",
    )
    ap.add_argument("--sessions", type=int, default=None, help="rollouts per run [256; 64]")
    ap.add_argument("--short", action="store_true", help="small sizes, a 10 s outage (CI)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep data and logs here")
    args = ap.parse_args()
    names = [n.strip() for n in args.faults.split(",") if n.strip() not in ("", "none")]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; choose from {', '.join(FAULTS)}")
    size = sizes(args.sessions, args.short)
    load = size.load
    print(
        f"{load.sessions} sessions ({load.tasks} groups of {load.group}) x {load.steps} steps, "
        f"{load.wave} at once; faults: {', '.join(names)}",
        flush=True,
    )
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rllm-faults-"))
    upstream = start_fake_upstream()
    rows = []
    try:
        reference = run_row(FAULTS["none"], size, upstream.url, work)
        ref = reference["counts"]
        print_row(row_json("none (reference)", reference, ref))
        for name in names:
            try:
                out = row_json(name, run_row(FAULTS[name], size, upstream.url, work), ref)
            except Exception as exc:  # the stack did not come up, or could not be counted
                out = failed_row(name, load, f"{type(exc).__name__}: {exc}")
            print_row(out)
            rows.append(out)
    finally:
        upstream.stop()
        clean = all(r["injected"] and not (r["lost"] or r["duplicated"]) for r in rows)
        if args.workdir is None and clean and len(rows) == len(names):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"data and logs kept in {work}", flush=True)
    print(json.dumps({"faults": rows}))


if __name__ == "__main__":
    main()
