"""Cgroups of one local sandbox: its limits (memory, pids, cpus) and a kill switch for
the whole sandbox and for each ``exec``.

Where the unified (v2) hierarchy is writable, every sandbox gets ``rllm-<id>/`` there with
one child per ``exec`` (``cgroup.kill`` ends a command's whole tree, whatever it
``setsid``-ed or double-forked). Limits go to v2 controllers when they are enabled for
us, else to the v1 ``memory``, ``pids`` and ``cpu`` hierarchies, else to rlimits of the
processes we start (``ulimit -v``, which bounds each process, not their sum).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from rllm.sandboxes.errors import SandboxUnavailableError
from rllm.sandboxes.types import SandboxSpec

__all__ = ["SandboxCgroups", "cgroup_mounts"]

_CPU_PERIOD_US = 100_000


def cgroup_mounts() -> dict[str, Path]:
    """Our own cgroup's directory per controller (``"2"`` for the unified hierarchy)."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="ascii") as file:
        for line in file:
            hier, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if hier != "0" else ["2"]:
                own[name] = path
    found: dict[str, Path] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as file:
        for line in file:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            root, mount_point, fstype = fields[3], fields[4], rest[0]
            if fstype == "cgroup2":
                names = ["2"]
            elif fstype == "cgroup":
                names = [o for o in rest[2].split(",") if o in own]
            else:
                continue
            for name in names:
                own_path = own.get(name)
                if own_path is not None and name not in found and own_path.startswith(root):
                    relative = own_path[len(root) :] if root != "/" else own_path
                    found[name] = Path(mount_point) / relative.lstrip("/")
    return found


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


@dataclass(frozen=True)
class SandboxCgroups:
    """The cgroup directories of one sandbox (all removed by ``remove``)."""

    sandbox_id: str
    """Whose they are."""
    tracker: Path | None
    """The v2 directory that holds every process of the sandbox (None: no writable v2)."""
    limits: tuple[Path, ...] = ()
    """v1 directories (``memory``, ``pids``, ``cpu``) that carry limits."""
    ulimit_kb: int | None = None
    """Address-space rlimit of each process when no memory cgroup could be used."""

    @classmethod
    def create(cls, sandbox_id: str, spec: SandboxSpec) -> SandboxCgroups:
        """Make the cgroups and write ``spec``'s limits.

        Raises:
            SandboxUnavailableError: ``cpus`` is asked for and no cpu controller is writable.
        """
        mounts = cgroup_mounts()
        name = f"rllm-{sandbox_id}"
        v2 = mounts.get("2")
        tracker = v2 / name if v2 is not None and _writable(v2) else None
        v2_controllers = _enabled(v2) if tracker is not None and v2 is not None else set()
        if tracker is not None:
            tracker.mkdir(exist_ok=True)
        wanted = {"memory": spec.memory_mb, "pids": spec.pids, "cpu": spec.cpus}
        v1: dict[str, Path] = {}
        for controller, value in wanted.items():
            parent = mounts.get(controller)
            if value is None or controller in v2_controllers or parent is None:
                continue
            if _writable(parent):
                v1[controller] = parent / name
                v1[controller].mkdir(exist_ok=True)
        use_v2 = tracker if tracker is not None else Path("/nonexistent")
        groups = cls(sandbox_id, tracker, tuple(v1.values()))
        try:
            ulimit_kb = _write_limits(spec, v2_controllers, use_v2, v1)
        except BaseException:
            groups.remove()
            raise
        return cls(sandbox_id, tracker, tuple(v1.values()), ulimit_kb)

    # --- joining ------------------------------------------------------------------
    def init_procs(self) -> list[str]:
        """``cgroup.procs`` files the sandbox's init process joins."""
        return self._procs(self.tracker / "init" if self.tracker else None)

    def exec_procs(self, index: int) -> tuple[list[str], Path | None]:
        """``cgroup.procs`` files of command ``index``'s own cgroup, and that cgroup."""
        group = self.tracker / f"e{index}" if self.tracker else None
        return self._procs(group), group

    def _procs(self, group: Path | None) -> list[str]:
        files = [str(p / "cgroup.procs") for p in self.limits]
        if group is not None:
            group.mkdir(exist_ok=True)
            files.append(str(group / "cgroup.procs"))
        return files

    # --- killing ------------------------------------------------------------------
    def kill(self, group: Path | None = None) -> None:
        """SIGKILL every process of ``group`` (default: the whole sandbox)."""
        targets = [group] if group is not None else [self.tracker, *self.limits]
        for target in targets:
            if target is not None:
                kill_cgroup(target)

    def remove(self) -> None:
        """Kill what is left and remove every directory (children first)."""
        self.kill()
        for top in (self.tracker, *self.limits):
            if top is not None:
                remove_cgroup(top)


def _write_limits(
    spec: SandboxSpec, v2_controllers: set[str], v2: Path, v1: dict[str, Path]
) -> int | None:
    """Write ``spec``'s limits; returns the rlimit fallback for memory, if any."""
    ulimit_kb = None
    if spec.memory_mb is not None:
        limit = str(spec.memory_mb * 1024 * 1024)
        if "memory" in v2_controllers:
            _write(v2 / "memory.max", limit)
            _write(v2 / "memory.swap.max", "0", optional=True)
        elif "memory" in v1:
            _write(v1["memory"] / "memory.limit_in_bytes", limit)
            _write(v1["memory"] / "memory.memsw.limit_in_bytes", limit, optional=True)
        else:
            ulimit_kb = spec.memory_mb * 1024
    if spec.pids is not None:  # without a pids controller there is no per-sandbox bound
        if "pids" in v2_controllers:
            _write(v2 / "pids.max", str(spec.pids))
        elif "pids" in v1:
            _write(v1["pids"] / "pids.max", str(spec.pids))
    if spec.cpus is not None:
        quota = max(1000, int(spec.cpus * _CPU_PERIOD_US))
        if "cpu" in v2_controllers:
            _write(v2 / "cpu.max", f"{quota} {_CPU_PERIOD_US}")
        elif "cpu" in v1:
            _write(v1["cpu"] / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            _write(v1["cpu"] / "cpu.cfs_quota_us", str(quota))
        else:
            raise SandboxUnavailableError(
                f"cpus={spec.cpus} needs a writable cpu cgroup controller (v2 or v1) and "
                f"none is here; leave cpus unset or run where cgroups are delegated"
            )
    return ulimit_kb


def _enabled(v2: Path) -> set[str]:
    with contextlib.suppress(OSError):
        return set((v2 / "cgroup.subtree_control").read_text().split())
    return set()


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not optional:
            raise


def kill_cgroup(path: Path) -> None:
    """SIGKILL every process in ``path`` and below (``cgroup.kill``, else one by one)."""
    if not path.is_dir():
        return
    kill_file = path / "cgroup.kill"
    if kill_file.exists():
        with contextlib.suppress(OSError):
            kill_file.write_text("1")
        return
    for _round in range(50):
        pids = _pids(path)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def _pids(path: Path) -> list[int]:
    pids: list[int] = []
    for procs in path.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.extend(int(p) for p in procs.read_text().split())
    return pids


def remove_cgroup(path: Path, wait_s: float = 2.0) -> None:
    """Remove ``path`` and its children once their processes are gone."""
    deadline = time.monotonic() + wait_s
    children = sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for directory in [*children, path]:
        while True:
            try:
                directory.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                kill_cgroup(directory)
                time.sleep(0.005)
