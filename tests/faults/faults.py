"""The faults of the table: how each is injected into a running :class:`Stack` while the
driver sends steps. ``inject`` runs in the main thread alongside the driver and returns a
line saying what it did; the gateway kill and the rebalance act between two waves of
sessions instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rllm.errors import InfraError
from rllm.infra.broker import LocalBroker, LocalCluster
from rllm.schemas.topics import TRAJECTORIES
from tests.faults.drive import Load, Progress
from tests.faults.stack import PROCESSORS_GROUP, Service, Stack, count, members

__all__ = ["FAULTS", "Fault", "FaultRun"]


@dataclass
class FaultRun:
    """A row in progress: the stack, the load, the driver's progress."""

    stack: Stack
    load: Load
    progress: Progress
    outage_s: float
    """How long the single broker stays stopped (``broker-outage``)."""
    root: Path
    notes: list[str] = field(default_factory=list)
    """What the wave hooks did."""


def _until(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``pred`` every 0.1 s.

    Raises:
        InfraError: naming ``what`` after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise InfraError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def _after_steps(run: FaultRun, fraction: float) -> int:
    """Wait until ``fraction`` of the steps were answered; how many were.

    Raises:
        InfraError: the drive ended first.
    """
    if not run.progress.wait_steps(max(1, int(run.load.total_steps * fraction))):
        raise InfraError(
            f"the drive ended after {len(run.progress.steps)} steps, before "
            f"{fraction:.0%} of {run.load.total_steps}"
        )
    return len(run.progress.steps)


# --- the faults ---------------------------------------------------------------------------


def _none(run: FaultRun) -> str:
    return "no fault (the reference run)"


def _broker_kill(run: FaultRun) -> str:
    cluster = run.stack.broker
    assert isinstance(cluster, LocalCluster)
    at = _after_steps(run, 0.25)
    cluster.kill(2)
    back = _after_steps(run, 0.6)
    cluster.restart(2)
    return f"node 2 of 3 SIGKILLed after {at} steps, restarted after {back}"


def _broker_outage(run: FaultRun) -> str:
    broker = run.stack.broker
    assert isinstance(broker, LocalBroker)
    at = _after_steps(run, 0.2)
    broker.stop()
    time.sleep(run.outage_s)  # the outage itself
    depth = run.stack.health()["spool_depth"]
    broker.start()
    return (
        f"broker stopped after {at} steps for {run.outage_s:.0f} s; the gateway had "
        f"{depth} events spooled, {len(run.progress.steps) - at} steps answered meanwhile"
    )


def _processors_kill(run: FaultRun) -> str:
    kafka = run.stack.kafka
    _until(lambda: count(kafka, TRAJECTORIES) >= run.load.sessions // 10, 120, "trajectories")
    at = count(kafka, TRAJECTORIES)
    run.stack.workers[0].kill()
    run.stack.add_worker()
    return f"worker SIGKILLed after {at} trajectories, a new one started at once"


def _rebalance_between(run: FaultRun, wave: int) -> None:
    """A second worker starts after the first wave and has joined by the end of the second
    (the driver waits for it there); it leaves (SIGTERM) as the third wave starts."""
    stack = run.stack
    if wave == 0:
        stack.add_worker()
    elif wave == 1:
        _until(lambda: members(stack.kafka, PROCESSORS_GROUP) == 2, 180, "the second worker")
        run.notes.append(
            f"a second worker joined by {count(stack.kafka, TRAJECTORIES)} trajectories"
        )
        stack.workers[1].terminate()
        run.notes.append(f"and left from {len(run.progress.steps)} steps on")


def _marker(run: FaultRun, name: str) -> Path:
    return run.root / f"{name}.paused"


def _kill_when_paused(run: FaultRun, service: Service, what: str) -> str:
    """Wait until ``service`` pauses (its marker file appears), SIGKILL it and start it
    again; returns the marker's text, where it paused."""
    marker = _marker(run, service.name)
    _until(marker.is_file, 300, f"{what} to pause ({marker})")
    service.kill()
    service.start()
    return marker.read_text().strip()


def _trainer_kill(run: FaultRun) -> str:
    where = _kill_when_paused(run, run.stack.trainer, "the trainer")
    return f"trainer SIGKILLed at {where} (before its commit), restarted"


def _history_kill(run: FaultRun) -> str:
    where = _kill_when_paused(run, run.stack.history, "the history sink")
    return f"history sink SIGKILLed after it {where}; restarted"


def _gateway_between(run: FaultRun, wave: int) -> None:
    """The broker stops after the first wave; after the second, whose steps went to the
    spool, the gateway is SIGKILLed, then the broker and the gateway start again (it drains
    the spool it finds)."""
    stack = run.stack
    if wave == 0:
        stack.broker.stop()
    elif wave == 1:
        depth = stack.health()["spool_depth"]
        if not depth:
            raise InfraError("the gateway spooled nothing while the broker was stopped")
        stack.gateway.kill()
        stack.broker.start()
        stack.gateway.start()
        stack.wait_gateway()
        run.notes.append(
            f"broker stopped for the second wave; gateway SIGKILLed with {depth} events in "
            f"its spool after {len(run.progress.steps)} steps, restarted with the broker"
        )


def _after_drive(run: FaultRun) -> str:
    """For faults injected between waves: wait for the drive, say what was done."""
    run.progress.wait_steps(run.load.total_steps)
    if not run.notes:
        raise InfraError("the drive ended before the fault's waves")
    return " ".join(run.notes)


@dataclass(frozen=True)
class Fault:
    """One row of the table."""

    name: str
    inject: Callable[[FaultRun], str]
    brokers: int = 1
    pause: str = ""
    """``trainer`` or ``history``: that service starts with its pause point set."""
    waves: Callable[[FaultRun, int], None] | None = None
    """Injects the fault between two waves of sessions instead (``inject`` waits)."""

    def start_args(self, run: FaultRun) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Extra arguments of the trainer and of the history service at their first start."""
        if self.pause == "trainer":
            marker = str(_marker(run, "trainer"))
            return ("--pause-at", "after_checkpoint:2", "--marker", marker), ()
        if self.pause == "history":
            return (), ("--pause-batch", "3", "--marker", str(_marker(run, "history")))
        return (), ()

    def between(self, run: FaultRun) -> Callable[[int], None] | None:
        """The driver's hook between waves, if this fault has one."""
        waves = self.waves
        return None if waves is None else lambda wave: waves(run, wave)


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("none", _none),
        Fault("broker-kill", _broker_kill, brokers=3),
        Fault("broker-outage", _broker_outage),
        Fault("processors-kill", _processors_kill),
        Fault("worker-rebalance", _after_drive, waves=_rebalance_between),
        Fault("trainer-kill", _trainer_kill, pause="trainer"),
        Fault("history-kill", _history_kill, pause="history"),
        Fault("gateway-kill", _after_drive, waves=_gateway_between),
    )
}
"""Every fault by name, in the table's order (``none`` is the reference run)."""
