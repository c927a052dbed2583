"""Running one command in a local sandbox: ``rllm-sandbox-enter`` joins its own cgroup
(so that a timeout kills the whole tree), enters the sandbox's namespaces and starts the
command with Docker's default privileges (``privileges``); output is read incrementally
and bounded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rllm.sandboxes.local.limits import kill_cgroup, remove_cgroup
from rllm.sandboxes.local.privileges import DOCKER_CAPS_MASK
from rllm.sandboxes.types import ExecResult, cut_output

__all__ = ["Command", "Entry", "enter_argv", "run_command"]

_CHUNK = 65536
_DRAIN_AFTER_EXIT_S = 0.2
"""How long output is still read once the command exited (a background child that keeps
stdout open must not hold ``exec`` up)."""


@dataclass(frozen=True)
class Entry:
    """How commands enter one sandbox."""

    program: str
    """Path of ``rllm-sandbox-enter``."""
    seccomp: str
    """The BPF program every command runs under."""
    init_pid: int
    """The sandbox's pid 1 on the host."""


@dataclass(frozen=True)
class Command:
    """One ``exec``, resolved: everything but the sandbox's process handles."""

    argv: Sequence[str]
    """What runs inside (``/bin/sh -c CMD`` for a shell string)."""
    cwd: str | None
    """Directory to run in; None: the sandbox's workdir (its pid 1's cwd)."""
    env: Mapping[str, str]
    """The whole environment."""
    uid: int
    """User id inside."""
    gid: int
    """Group id inside."""
    stdin: bytes | None
    """Fed to the command, then closed."""
    timeout_s: float | None
    """Wall-clock limit; None: none."""
    output_limit: int
    """Bytes kept of each stream."""


def enter_argv(entry: Entry, procs: Sequence[str], command: Command) -> list[str]:
    """``rllm-sandbox-enter`` into ``entry``'s sandbox and cgroups ``procs``, in its root
    and its cwd (never a host directory), as the command's user."""
    argv = [entry.program, "--pid", str(entry.init_pid)]
    for path in procs:
        argv += ["--cgroup", path]
    argv += ["--uid", str(command.uid), "--gid", str(command.gid), "--groups", str(command.gid)]
    if command.cwd is not None:
        argv += ["--cwd", command.cwd]
    argv += ["--caps", f"{DOCKER_CAPS_MASK:x}", "--seccomp", entry.seccomp, "--"]
    return [*argv, *command.argv]


async def run_command(
    entry: Entry, procs: list[str], group: Path | None, command: Command
) -> ExecResult:
    """Run ``command``; kill every process of ``group`` on timeout. The result's
    ``exit_code`` is ``128 + signal`` for a command killed by a signal (137: SIGKILL)."""
    argv = enter_argv(entry, procs, command)
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if command.stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(command.env),
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        asyncio.ensure_future(_read_bounded(proc.stdout, command.output_limit)),
        asyncio.ensure_future(_read_bounded(proc.stderr, command.output_limit)),
    ]
    feeder = asyncio.ensure_future(_feed(proc, command.stdin))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), command.timeout_s)
    except TimeoutError:
        timed_out = True
        _kill_tree(proc, group)
        await proc.wait()
    finally:
        if proc.returncode is None:  # cancelled: leave nothing running
            _kill_tree(proc, group)
    _done, pending = await asyncio.wait([*readers, feeder], timeout=_DRAIN_AFTER_EXIT_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if group is not None:
        await asyncio.to_thread(_forget_group, group, timed_out)
    (out, out_total), (err, err_total) = (_result(t) for t in readers)
    code = proc.returncode
    exit_code = None if timed_out or code is None else (128 - code if code < 0 else code)
    return ExecResult(
        stdout=cut_output(out, command.output_limit, out_total),
        stderr=cut_output(err, command.output_limit, err_total),
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        truncated=out_total > command.output_limit or err_total > command.output_limit,
        error=f"timed out after {command.timeout_s:g} s; every process it started was killed"
        if timed_out
        else None,
    )


async def _read_bounded(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, int]:
    """Read to EOF, keeping ``limit`` bytes; returns (kept, total)."""
    kept = bytearray()
    total = 0
    try:
        while chunk := await stream.read(_CHUNK):
            total += len(chunk)
            if len(kept) < limit:
                kept += chunk[: limit - len(kept)]
    except asyncio.CancelledError:
        pass
    return bytes(kept), total


async def _feed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
    if proc.stdin is None or data is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()


def _result(task: asyncio.Future[tuple[bytes, int]]) -> tuple[bytes, int]:
    if task.cancelled() or task.exception() is not None:
        return b"", 0
    return task.result()


def _kill_tree(proc: asyncio.subprocess.Process, group: Path | None) -> None:
    """SIGKILL the command's cgroup, and the session it leads (started with
    ``start_new_session``, so its group is its pid: the entry process itself, and every
    process on a host without cgroups). Never ``proc.send_signal``: it polls (``waitpid``)
    first, so a command already dead would be reaped here instead of by asyncio's child
    watcher, which then logs "Unknown child process pid …, will report returncode 255"."""
    if group is not None:
        kill_cgroup(group)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _forget_group(group: Path, timed_out: bool) -> None:
    """Remove the command's cgroup when nothing of it is left (background children of
    a command that exited keep running, and their cgroup stays until ``close``)."""
    if timed_out:
        remove_cgroup(group, wait_s=1.0)
        return
    with contextlib.suppress(OSError):
        group.rmdir()
