"""What a live local sandbox leaves on disk (``run_dir/<id>/state.json``) and how to tear
one down from it alone, so that sandboxes leaked by a dead process are found and reaped.

A sandbox's processes die with its owner (bubblewrap's ``--die-with-parent``), at its
lifetime (its init is ``sleep <lifetime_s>``), or at ``close``; its mount, cgroups and
run directory stay until ``close``, garbage collection, process exit or ``reap``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from rllm.sandboxes.local.limits import SandboxCgroups
from rllm.sandboxes.local.overlay import RootfsDirs, unmount_rootfs

__all__ = ["SandboxState", "process_start", "read_states", "teardown"]

STATE_FILE = "state.json"


def process_start(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (None: no such process), which
    tells a live process from a later one that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    if fields[0] == b"Z":
        return None
    return int(fields[19])


@dataclass(frozen=True)
class SandboxState:
    """One sandbox as its state file records it."""

    id: str
    """Sandbox id (also its run directory's name)."""
    image: str
    """What ``SandboxSpec.image`` said."""
    labels: dict[str, str]
    """Its labels, ``rllm.backend=local`` among them."""
    created_at: float
    """Unix time of creation."""
    run_dir: str
    """Its directory (``upper``, ``work``, ``merged``, this file)."""
    owner_pid: int
    """The process that created it."""
    owner_start: int | None
    """``process_start`` of the owner."""
    pid: int | None = None
    """bubblewrap's pid on the host (None until it started)."""
    pid_start: int | None = None
    """``process_start`` of ``pid``."""
    init_pid: int | None = None
    """The sandbox's pid 1 on the host (namespaces are entered through it)."""
    cgroup_tracker: str | None = None
    """The v2 cgroup of all its processes."""
    cgroup_limits: list[str] = field(default_factory=list)
    """Its v1 limit cgroups."""

    @property
    def dirs(self) -> RootfsDirs:
        """Its root filesystem's directories."""
        return RootfsDirs(Path(self.run_dir))

    @property
    def cgroups(self) -> SandboxCgroups:
        """Its cgroups, rebuilt from the paths."""
        tracker = Path(self.cgroup_tracker) if self.cgroup_tracker else None
        return SandboxCgroups(self.id, tracker, tuple(Path(p) for p in self.cgroup_limits))

    def alive(self) -> bool:
        """Whether its bubblewrap process still runs."""
        return self.pid is not None and process_start(self.pid) == self.pid_start

    def owner_alive(self) -> bool:
        """Whether the process that created it still runs."""
        return process_start(self.owner_pid) == self.owner_start

    def save(self) -> SandboxState:
        """Write the state file (atomically); returns self."""
        path = Path(self.run_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        os.replace(tmp, path)
        return self

    def started(self, pid: int, init_pid: int) -> SandboxState:
        """A copy that records its bubblewrap and init processes."""
        return replace(self, pid=pid, pid_start=process_start(pid), init_pid=init_pid)


def read_states(run_dir: Path) -> list[SandboxState]:
    """Every readable state file under ``run_dir``, oldest first."""
    states = []
    for path in run_dir.glob(f"*/{STATE_FILE}"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            states.append(SandboxState(**json.loads(path.read_text(encoding="utf-8"))))
    return sorted(states, key=lambda s: s.created_at)


KILLED_WAIT_S = 30.0
"""How long ``teardown`` waits for a SIGKILLed bubblewrap to exit and be reaped."""


def teardown(state: SandboxState, popen: subprocess.Popen[bytes] | None = None) -> None:
    """Kill every process of the sandbox, unmount its root, remove its cgroups and run
    directory. Idempotent; safe on a half-created sandbox and from another process.

    Args:
        state: the sandbox.
        popen: its bubblewrap process when this process started it (reaped here).
    """
    if (
        state.init_pid is not None
        and state.pid is not None
        and _parent(state.init_pid) == state.pid
    ):
        # pid 1 first: the kernel ends its namespace, and bubblewrap reaps it and exits
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.init_pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(1.0)
        popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            # SIGKILLed, it ends once the kernel has torn its namespaces down: seconds on
            # a loaded machine; unreaped, it would stay a zombie (and warn when collected)
            popen.wait(KILLED_WAIT_S)
    elif state.alive() and state.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
    cgroups = state.cgroups
    cgroups.kill()
    _wait_gone(state)
    unmount_rootfs(state.dirs)
    cgroups.remove()
    shutil.rmtree(state.run_dir, ignore_errors=True)


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def _wait_gone(state: SandboxState, wait_s: float = 2.0) -> None:
    deadline = time.monotonic() + wait_s
    pids = [p for p in (state.pid, state.init_pid) if p is not None]
    for pid in pids:
        while process_start(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.002)
