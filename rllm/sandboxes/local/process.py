"""Starting a sandbox's bubblewrap process: one long-lived ``bwrap`` holding new user,
pid, ipc, uts, mount, cgroup (and, unless ``network=host``, network) namespaces over the
overlay root, with ``sleep <lifetime_s>`` as its command so the sandbox ends at its
lifetime even when the host process hangs.

The user namespace maps sandbox ids 0-65535 to an unprivileged host range (``IdMap``,
written by us through ``--userns-block-fd``); its pid 1 has Docker's default capabilities,
``no_new_privs`` and Docker's seccomp profile (``privileges``). ``/proc`` and ``/sys`` are
what Docker shows: ``/proc/sys``, ``sysrq-trigger``, ``irq``, ``bus`` and ``fs`` read-only,
``kcore``, ``keys``, ``timer_list``, ``sched_debug`` and the like masked, ``/sys`` read-only
with ``/sys/firmware`` masked. bubblewrap reads its arguments from a pipe (``--args``), so
the sandbox's ``/proc/1/cmdline`` names no host path. It is started from one long-lived
spawner thread with ``--die-with-parent``: the sandbox's processes die with the process
that owns it (a thread's exit would otherwise kill them).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rllm.sandboxes.errors import SandboxError, SandboxUnavailableError
from rllm.sandboxes.local.privileges import DOCKER_CAPS, IdMap
from rllm.sandboxes.types import Mount, NetworkMode, SandboxSpec

__all__ = [
    "BwrapProcess",
    "Start",
    "bwrap_argv",
    "join_cgroups",
    "require_tools",
    "setup_sysfs",
    "spawn",
    "under_dev",
]

MASKED_FILES = ("kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug")
"""Files of ``/proc`` that Docker masks (``/dev/null`` over them)."""
MASKED_DIRS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
"""Directories Docker masks (an empty read-only tmpfs over them)."""
READ_ONLY_PROC = ("bus", "fs", "irq", "sys", "sysrq-trigger")
"""Parts of ``/proc`` that Docker makes read-only."""

JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'
"""``sh -c`` script: write its pid into each cgroup.procs file before ``--``, then exec."""

_READY_TIMEOUT_S = 10.0


def require_tools() -> dict[str, str]:
    """Paths of bwrap and sh.

    Raises:
        SandboxUnavailableError: one is missing, we are not root, or there is no overlayfs.
    """
    found = {name: shutil.which(name) for name in ("bwrap", "sh")}
    if found["bwrap"] is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed; the local sandbox backend runs every "
            "sandbox in it: apt-get install -y bubblewrap"
        )
    if os.geteuid() != 0:
        raise SandboxUnavailableError(
            f"the local sandbox backend mounts overlays and maps user ids, which needs root "
            f"(running as uid {os.geteuid()}); run as root or use the docker backend"
        )
    with open("/proc/filesystems", encoding="ascii") as file:
        if "overlay" not in file.read().split():
            raise SandboxUnavailableError(
                "the kernel has no overlayfs; load it with `modprobe overlay`"
            )
    return {name: path for name, path in found.items() if path is not None}


def join_cgroups(procs: Sequence[str], ulimit_kb: int | None = None) -> list[str]:
    """argv prefix that joins the cgroups in ``procs`` (and sets the rlimit) then execs."""
    script = (
        JOIN_SCRIPT if ulimit_kb is None else f"ulimit -v {ulimit_kb} || exit 125; {JOIN_SCRIPT}"
    )
    return ["/bin/sh", "-c", script, "rllm-join", *procs, "--"]


def under_dev(mount: Mount) -> bool:
    """Whether ``mount`` lands in the sandbox's ``/dev`` (bubblewrap's own tmpfs, outside
    the overlay): such a mount must be a read-only file, copied in by bubblewrap."""
    return mount.target.startswith("/dev/")


def bwrap_argv(
    bwrap: str, merged: Path, spec: SandboxSpec, hostname: str, workdir: str
) -> list[str]:
    """bubblewrap's arguments up to the command (fds are appended by ``spawn``). The
    spec's mounts are already in ``merged`` (``bind_mounts``): bubblewrap runs as the
    sandbox's unprivileged host root, which cannot reach host paths by name."""
    argv = [
        bwrap,
        "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
        "--die-with-parent",
        "--new-session",
        "--hostname", hostname,
        "--bind", str(merged), "/",
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "1777", "--tmpfs", "/dev/shm",
        "--chdir", workdir,
        "--clearenv",
        "--cap-drop", "ALL",
    ]  # fmt: skip  # one bubblewrap option and its arguments per row
    argv += _docker_proc_and_sys()
    # /tmp stays in the overlay, as in a container: 1777 from the image, kept by a RUN for
    # the next step's layer, and counted against disk_mb with the rest of the upper dir
    for mount in spec.mounts:
        if under_dev(mount):
            if not mount.read_only or not mount.source.is_file():
                raise SandboxError(
                    f"a mount into /dev must be a read-only file: {mount.source} -> {mount.target}"
                )
            argv += ["--ro-bind-data", str(mount.source), mount.target]  # spawn opens it
    for cap in DOCKER_CAPS:
        argv += ["--cap-add", f"CAP_{cap}"]
    if spec.network == NetworkMode.HOST:
        argv += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
    else:
        argv.append("--unshare-net")
    return argv


def _docker_proc_and_sys() -> list[str]:
    """Docker's read-only and masked paths of ``/proc``, and ``/sys`` read-only (the
    host's, replaced by a sysfs of the sandbox's own network namespace once it runs)."""
    argv: list[str] = []
    for name in READ_ONLY_PROC:
        if os.path.exists(f"/proc/{name}"):
            argv += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for name in MASKED_FILES:
        if os.path.exists(f"/proc/{name}"):
            argv += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    argv += ["--ro-bind", "/sys", "/sys"]
    for path in MASKED_DIRS:
        if os.path.isdir(path):
            argv += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    return argv


@dataclass(frozen=True)
class BwrapProcess:
    """A started sandbox: bubblewrap on the host and the sandbox's pid 1."""

    popen: subprocess.Popen[bytes]
    """bubblewrap (reaped by ``teardown`` or ``Popen.wait``)."""
    init_pid: int
    """The sandbox's pid 1, as the host sees it (its namespaces are entered through it)."""


@dataclass(frozen=True)
class Start:
    """What ``spawn`` needs besides bubblewrap's arguments."""

    lifetime_s: float | None
    """The sandbox's lifetime (its pid 1 sleeps that long)."""
    log: Path
    """bubblewrap's output."""
    idmap: IdMap
    """The id map written for its user namespace."""
    seccomp: Path
    """The BPF program its pid 1 runs under."""


def spawn(prefix: list[str], argv: list[str], start: Start) -> BwrapProcess:
    """Start bubblewrap (on the spawner thread) and wait until its command runs.

    Raises:
        SandboxError: bubblewrap failed; its own message is quoted.
    """
    return _spawner().call(lambda: _start(prefix, argv, start))


def _args_pipe(args: list[str]) -> int:
    """A pipe holding bubblewrap's arguments for ``--args`` (read end returned)."""
    data = b"".join(a.encode() + b"\0" for a in args)
    read_end, write_end = os.pipe()
    try:
        if len(data) > 65536:  # more than a pipe holds before its reader starts
            raise SandboxError(f"bubblewrap's arguments are too long ({len(data)} bytes)")
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


def _start(prefix: list[str], argv: list[str], start: Start) -> BwrapProcess:
    seccomp = os.open(start.seccomp, os.O_RDONLY | os.O_CLOEXEC)
    passed = [seccomp]
    args = argv[1:]
    for i, arg in enumerate(args[:-1]):
        if arg == "--ro-bind-data":  # the file's content, read by bubblewrap from an fd
            data = os.open(args[i + 1], os.O_RDONLY | os.O_CLOEXEC)
            passed.append(data)
            args[i + 1] = str(data)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    sleep = "infinity" if start.lifetime_s is None else f"{start.lifetime_s:.3f}"
    args += ["--seccomp", str(seccomp), "--info-fd", str(info_w), "--userns-block-fd", str(block_r)]
    args_fd = _args_pipe(args)
    passed += [info_w, block_r, args_fd]
    host_id = str(start.idmap.host(0))
    drop = ["setpriv", f"--reuid={host_id}", f"--regid={host_id}", "--clear-groups", "--"]
    command = [*prefix, *drop, argv[0], "--args", str(args_fd), "--", "sleep", sleep]
    try:
        with open(start.log, "wb") as err:
            popen = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=passed
            )
    finally:
        for fd in passed:
            os.close(fd)
    log = start.log
    try:
        init_pid = _child_pid(info_r)
        if init_pid is None:
            popen.wait(5)
            raise SandboxError(
                f"bubblewrap failed to start (exit {popen.returncode}): {_tail(log)}"
            )
        for kind in ("uid_map", "gid_map"):
            with open(f"/proc/{init_pid}/{kind}", "w", encoding="ascii") as file:
                file.write(start.idmap.line())
        os.write(block_w, b"1")
        _wait_ready(popen, init_pid, log)
    except BaseException:
        popen.kill()
        popen.wait()
        raise
    finally:
        os.close(info_r)
        os.close(block_w)
    return BwrapProcess(popen, init_pid)


def _child_pid(fd: int) -> int | None:
    data = b""
    while not data.rstrip().endswith(b"}"):
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
    return int(json.loads(data)["child-pid"])


def _wait_ready(popen: subprocess.Popen[bytes], init_pid: int, log: Path) -> None:
    """Until the sandbox's pid 1 has forked its command: then every mount is in place."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    children = f"/proc/{init_pid}/task/{init_pid}/children"
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise SandboxError(f"bubblewrap exited with {popen.returncode}: {_tail(log)}")
        try:
            with open(children, encoding="ascii") as file:
                pids = file.read().split()
            if pids:
                with open(f"/proc/{pids[0]}/comm", encoding="ascii") as file:
                    if file.read().strip() == "sleep":
                        return
        except OSError:
            pass
        time.sleep(0.0002)
    raise SandboxError(f"the sandbox did not start within {_READY_TIMEOUT_S:.0f} s: {_tail(log)}")


def setup_sysfs(enter: str, init_pid: int) -> None:
    """Mount a read-only sysfs of the sandbox's own network namespace over the host's
    ``/sys`` (before any of its commands run), ``/sys/firmware`` masked.

    Raises:
        SandboxError: the entry program failed (its message is quoted).
    """
    proc = subprocess.run(
        [enter, "--pid", str(init_pid), "--setup-sysfs"], capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise SandboxError(
            f"setting up /sys in the sandbox failed: {proc.stderr.decode(errors='replace')}"
        )


def _tail(log: Path) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "(no output)"
    return "\n".join(text.splitlines()[-5:]) or "(no output)"


class _Spawner:
    """One daemon thread that starts every bubblewrap: ``--die-with-parent`` follows the
    thread that forked, so it must live as long as the process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._queue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="rllm-sandbox-spawner", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, future = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)

    def call(self, fn: Callable[[], BwrapProcess]) -> BwrapProcess:
        future: concurrent.futures.Future[BwrapProcess] = concurrent.futures.Future()
        self._queue.put((fn, future))
        return future.result()


_SPAWNER: list[_Spawner] = []
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> _Spawner:
    with _SPAWNER_LOCK:
        if not _SPAWNER or _SPAWNER[0].pid != os.getpid():  # a forked child needs its own
            _SPAWNER[:] = [_Spawner()]
        return _SPAWNER[0]
