"""What a sandbox on a hosted service (daytona, modal) does the same way whatever the
service: every command through ``remote.RemoteCommand`` (bounded output, the tree killed
on timeout, the user switched, stdin uploaded first), directories as one tar each way,
the spec's workdir made at start. A service's class supplies only its calls: upload a
file, execute a script, read a file, snapshot, close."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rllm.sandboxes.errors import SandboxClosedError, SandboxError
from rllm.sandboxes.remote import (
    RemoteCommand,
    pack_dir,
    tar_command,
    tar_paths,
    unpack_dir,
    untar_command,
    workdir_command,
)
from rllm.sandboxes.types import ExecResult, SandboxSpec, SnapshotInfo

__all__ = ["HostedSandbox", "abnormal"]


def abnormal(started: float, timed_out: bool, error: str) -> ExecResult:
    """The result of a command the service ended (its deadline, the sandbox's death)."""
    return ExecResult(
        stdout="",
        stderr="",
        exit_code=None,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        error=error,
    )


class HostedSandbox(ABC):
    """The shared part of a hosted service's sandbox (see ``types.Sandbox``)."""

    service: str = "hosted"
    """The service's name in messages (``daytona``, ``modal``)."""

    def __init__(self, spec: SandboxSpec, store: Any) -> None:
        self._spec = spec
        self._store = store
        self._closed = False

    @property
    @abstractmethod
    def id(self) -> str:
        """The service's id for it."""

    @property
    def spec(self) -> SandboxSpec:
        """What it was created from."""
        return self._spec

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"{self.service} sandbox {self.id} is closed")

    # --- what each service supplies ---------------------------------------------------
    @abstractmethod
    async def _upload(self, data: bytes, path: str) -> None:
        """Put ``data`` at ``path`` in the sandbox (raises SandboxError)."""

    @abstractmethod
    async def _execute(
        self, command: RemoteCommand, env: Mapping[str, str] | None, started: float
    ) -> ExecResult:
        """Run ``command.script`` and parse its output (``command.parse``)."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """Read ``path``; ``FileNotFoundError`` when it is not there."""

    # --- the same everywhere ---------------------------------------------------------
    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
    ) -> ExecResult:
        """Run ``cmd``; a failing, timed-out or orphaned command is a result."""
        return await self._run(cmd, cwd, env, timeout_s, user or self._spec.user, stdin)

    async def prepare(self) -> None:
        """Create the spec's workdir (as the image's user), owned by the spec's user."""
        command = workdir_command(self._spec.workdir, self._spec.user)
        made = await self._run(["/bin/sh", "-c", command], "/", None, 60, None, None)
        if not made.ok:
            raise SandboxError(
                f"cannot create workdir {self._spec.workdir} in {self.service} sandbox "
                f"{self.id}: {made.stderr.strip() or made.error}"
            )

    async def _run(
        self,
        cmd: str | Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        timeout_s: float | None,
        user: str | None,
        stdin: bytes | str | None,
    ) -> ExecResult:
        self._check_open()
        command = RemoteCommand.build(
            cmd,
            cwd=cwd or self._spec.workdir,
            limit=self._spec.output_limit_bytes,
            timeout_s=timeout_s,
            user=user,
            has_stdin=stdin is not None,
        )
        started = time.monotonic()
        if command.stdin_path is not None and stdin is not None:
            await self._upload(stdin.encode() if isinstance(stdin, str) else stdin,
                               command.stdin_path)  # fmt: skip
        return await self._execute(command, env, started)

    async def _must(self, command: str, what: str) -> None:
        result = await self.exec(["/bin/sh", "-c", command], cwd="/", timeout_s=600)
        if not result.ok:
            raise SandboxError(
                f"{what} in {self.service} sandbox {self.id} failed: {result.stderr}"
            )

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy ``local``'s contents into ``remote`` as one tar."""
        self._check_open()
        tar_path = tar_paths()
        await self._upload(pack_dir(local), tar_path)
        await self._must(untar_command(tar_path, remote), f"unpacking {local} into {remote}")

    async def download_dir(self, remote: str, local: Path) -> None:
        """Copy ``remote``'s contents into ``local`` as one tar."""
        self._check_open()
        tar_path = tar_paths()
        await self._must(tar_command(remote, tar_path), f"packing {remote}")
        try:
            unpack_dir(await self.read_file(tar_path), local)
        finally:
            await self._must(f"rm -f {tar_path}", "removing the copy's tar")

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Freeze its filesystem as ``name`` through the service's snapshot store."""
        self._check_open()
        info: SnapshotInfo = await self._store.create(self, name)
        return info
