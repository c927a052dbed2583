"""The fault table, shortened, in CI: ``perf/faults.py --short`` in two runs of a few
minutes each on two cores (one of three brokers SIGKILLed and restarted, the trainer
SIGKILLed between update and commit, the gateway SIGKILLed with steps in its spool; a
processors worker SIGKILLed, a second worker joining and leaving), each fault on a fresh
broker with every stage running. broker-outage and history-kill are left to
``perf/faults.py`` (about 2.5 min more here; both measured 0 lost, 0 duplicated). Every
row must lose nothing, duplicate nothing after dedup by ``event_id`` and yield the
episodes of the fault-free run of the same input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

FAULT_RUNS = (
    ("broker-kill", "trainer-kill", "gateway-kill"),
    ("processors-kill", "worker-rebalance"),
)
SESSIONS, GROUP, STEPS = 64, 4, 3  # --short


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("faults", FAULT_RUNS, ids=lambda f: "+".join(f))
def test_each_fault_loses_nothing_and_duplicates_nothing(
    faults: tuple[str, ...], tmp_path: Path
) -> None:
    proc = subprocess.run(
        [
            *(sys.executable, "perf/faults.py", "--short", "--faults", ",".join(faults)),
            *("--workdir", str(tmp_path)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
    )
    table = proc.stdout + proc.stderr[-3000:]
    assert proc.returncode == 0, table
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["faults"]
    assert [r["fault"] for r in rows] == list(faults), table
    for row in rows:
        assert row["injected"], table
        got = (row["steps_sent"], row["lost"], row["duplicated"], row["episodes_equal"])
        assert got == (SESSIONS * STEPS, 0, 0, True), f"{row['fault']}: {got}\n{table}"
        assert row["stages"] == {
            "history_steps": SESSIONS * STEPS,
            "trajectories": SESSIONS,
            "episodes": SESSIONS // GROUP,
            "history_trajectories": SESSIONS,
            "history_episodes": SESSIONS // GROUP,
            "trained": SESSIONS // GROUP,
            "partial": 0,
        }, table
