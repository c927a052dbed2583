"""One-call operations over any backend, for the CLI and scripts: run a command in a fresh
sandbox, a line-by-line shell, take a snapshot after a setup command, parse durations."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rllm.errors import ConfigError
from rllm.sandboxes.snapshots import ensure_snapshot, snapshot_key
from rllm.sandboxes.types import ExecResult, Sandbox, SandboxBackend, SandboxSpec, SnapshotInfo

__all__ = ["PWD_MARK", "parse_duration", "run_once", "shell_line", "snapshot_after"]

PWD_MARK = "\x1e"
"""Separates a shell line's output from the directory it ended in."""

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h`` or ``7d``.

    Raises:
        ConfigError: the text is not such a duration.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if match is None:
        raise ConfigError(f"{text!r} is not a duration; write e.g. 90s, 15m, 2h or 7d")
    return float(match.group(1)) * _UNITS[match.group(2)]


async def run_once(
    backend: SandboxBackend,
    spec: SandboxSpec,
    cmd: str | Sequence[str],
    timeout_s: float | None = None,
) -> ExecResult:
    """Create a sandbox, run ``cmd`` in it, close it; the command's result."""
    sandbox = await backend.create(spec)
    try:
        return await sandbox.exec(cmd, timeout_s=timeout_s)
    finally:
        await sandbox.close()


async def shell_line(
    sandbox: Sandbox, line: str, cwd: str, timeout_s: float | None = None
) -> tuple[ExecResult, str]:
    """Run one line of a human's shell in ``cwd``; the result (its output without the
    directory mark) and the directory the line ended in, so ``cd`` carries over."""
    script = f'cd "$1" || exit 1\n{line}\n__rc=$?\nprintf "{PWD_MARK}%s" "$PWD"\nexit $__rc\n'
    result = await sandbox.exec(["/bin/sh", "-c", script, "sh", cwd], timeout_s=timeout_s)
    stdout, mark, new_cwd = result.stdout.rpartition(PWD_MARK)
    if not mark:
        return result, cwd
    return (
        ExecResult(
            stdout=stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_s=result.duration_s,
            truncated=result.truncated,
            error=result.error,
        ),
        new_cwd or cwd,
    )


async def snapshot_after(
    backend: SandboxBackend,
    spec: SandboxSpec,
    name: str,
    setup: str | None,
    on_output: Callable[[ExecResult], None] | None = None,
) -> SnapshotInfo:
    """A snapshot ``name`` of a sandbox from ``spec`` after the shell command ``setup``
    (keyed by backend, image and command, so the same recipe is reused while valid).

    Raises:
        SandboxError: the setup command failed (its exit code and output are named).
    """
    from rllm.sandboxes.errors import SandboxError

    async def prepare(sandbox: Sandbox) -> None:
        if not setup:
            return
        result = await sandbox.exec(setup)
        if on_output is not None:
            on_output(result)
        if not result.ok:
            tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
            raise SandboxError(
                f"snapshot {name!r}: the setup command exited {result.exit_code}: "
                + " | ".join(tail)
            )

    key = snapshot_key(backend.name, spec.image, setup or "")
    return await ensure_snapshot(backend, spec, key, prepare, name=name)
