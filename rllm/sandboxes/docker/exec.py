"""Running one command in a container: argv, bounded reading of docker's multiplexed
output stream, and killing a command's whole process tree by its environment marker."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rllm.sandboxes.types import cut_output

__all__ = [
    "EXEC_ID_ENV",
    "KILL_SCRIPT",
    "STDIN_DIR",
    "Output",
    "close_socket",
    "command_argv",
    "in_thread",
    "read_output",
    "stdin_argv",
]

T = TypeVar("T")

EXEC_ID_ENV = "RLLM_EXEC_ID"
"""Set on every command, inherited by all it starts (setsid or not): what a timeout kills."""

KILL_SCRIPT = r"""
id=$1; self=$$
for round in 1 2 3 4 5 6 7 8; do
  found=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$self" ] && continue
    if grep -qs "RLLM_EXEC_ID=$id" "$d/environ"; then kill -9 "$p" 2>/dev/null && found=1; fi
  done
  [ "$found" = 0 ] && exit 0
done
"""
"""Run as root with the exec id as ``$1``: SIGKILL every process whose environment carries
it, in rounds until none is left (so children forked meanwhile die too)."""

_STDIN_WRAPPER = 'exec 0<"$0" || exit 126; rm -f "$0" 2>/dev/null; exec "$@"'
STDIN_DIR = "/tmp/.rllm-stdin"
"""Where a command's stdin is put: mode 0777 (not sticky), so any user can remove it."""


def command_argv(cmd: str | Sequence[str]) -> list[str]:
    """A shell string runs by ``/bin/sh -c``; an argv list runs as it is."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    argv = [str(part) for part in cmd]
    if not argv:
        raise ValueError("exec needs a command: got an empty argv list")
    return argv


def stdin_argv(argv: list[str], stdin_path: str) -> list[str]:
    """``argv`` with its standard input read from ``stdin_path`` (removed once opened)."""
    return ["/bin/sh", "-c", _STDIN_WRAPPER, stdin_path, *argv]


@dataclass
class _Stream:
    limit: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.total += len(data)

    def text(self) -> str:
        return cut_output(bytes(self.kept), self.limit, self.total)


@dataclass
class Output:
    """What one command wrote: at most ``limit`` bytes of each stream kept, all counted."""

    limit: int
    stdout: _Stream = field(init=False)
    stderr: _Stream = field(init=False)

    def __post_init__(self) -> None:
        self.stdout = _Stream(self.limit)
        self.stderr = _Stream(self.limit)

    @property
    def truncated(self) -> bool:
        """Whether either stream went over the limit."""
        return self.stdout.total > self.limit or self.stderr.total > self.limit


def _read_exactly(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.read(n - len(data)) if not hasattr(sock, "recv") else sock.recv(n - len(data))
        if not chunk:
            return data
        data += chunk
    return data


def read_output(sock: Any, limit: int) -> Output:
    """Read docker's multiplexed stream (8-byte frame headers) from an exec's hijacked
    socket to its end, keeping at most ``limit`` bytes per stream and draining the rest.
    A socket closed under it (a timeout) ends the reading, with what came so far."""
    out = Output(limit)
    with contextlib.suppress(OSError, ValueError):
        while True:
            header = _read_exactly(sock, 8)
            if len(header) < 8:
                break
            kind, size = struct.unpack(">BxxxL", header)
            while size > 0:
                chunk = _read_exactly(sock, min(size, 1 << 16))
                if not chunk:
                    return out
                size -= len(chunk)
                (out.stderr if kind == 2 else out.stdout).add(chunk)
    return out


def close_socket(sock: Any) -> None:
    """Shut an exec's socket down (wakes a reader blocked on it) and close it."""
    raw = getattr(sock, "_sock", sock)
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        raw.close()
    response = getattr(sock, "_response", None)
    if response is not None:
        with contextlib.suppress(Exception):
            response.close()


def in_thread(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run ``fn`` on a thread of its own (a reader may block for as long as its command
    runs, so it must not hold one of the backend's pool threads)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # error is None: result is what run() returned, a T

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name="rllm-docker-exec", daemon=True).start()
    return future
