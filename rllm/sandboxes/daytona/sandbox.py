"""One Daytona sandbox behind the ``Sandbox`` contract: commands through the toolbox's
``/process/execute`` (wrapped by ``remote.RemoteCommand``), files through its file API,
snapshots through ``POST /sandbox/{id}/snapshot``."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from daytona import AsyncSandbox, DaytonaError, DaytonaTimeoutError
from daytona_api_client_async import SandboxState

from rllm.sandboxes.daytona.client import daytona_errors, not_found
from rllm.sandboxes.errors import SandboxClosedError, SandboxError, SnapshotError
from rllm.sandboxes.remote import (
    RemoteCommand,
    env_of,
    pack_dir,
    tar_command,
    tar_paths,
    unpack_dir,
    untar_command,
    workdir_command,
)
from rllm.sandboxes.types import ExecResult, SandboxSpec, SnapshotInfo

if TYPE_CHECKING:
    from rllm.sandboxes.daytona.snapshots import DaytonaSnapshots

__all__ = ["DaytonaSandbox", "delete_at_exit"]

_NO_DEADLINE_S = 24 * 3600.0
"""The service-side exec deadline of a command without a timeout (one must always be sent:
Daytona's default is 10 s)."""


class DaytonaSandbox:
    """A running Daytona sandbox; ``close`` deletes it (idempotent)."""

    def __init__(
        self,
        remote: AsyncSandbox,
        spec: SandboxSpec,
        store: DaytonaSnapshots,
        finalizer: Callable[[], None] | None = None,
    ) -> None:
        self._remote = remote
        self._spec = spec
        self._store = store
        self._closed = False
        self._finalizer = weakref.finalize(self, finalizer) if finalizer else None

    @property
    def id(self) -> str:
        """Daytona's sandbox id."""
        return str(self._remote.id)

    @property
    def spec(self) -> SandboxSpec:
        """What it was created from."""
        return self._spec

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"daytona sandbox {self.id} is closed")

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
                f"cannot create workdir {self._spec.workdir} in daytona sandbox {self.id}: "
                f"{made.stderr.strip() or made.error}"
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
            data = stdin.encode() if isinstance(stdin, str) else stdin
            with daytona_errors(f"uploading stdin to daytona sandbox {self.id}"):
                await self._remote.fs.upload_file(data, command.stdin_path)
        try:
            response = await self._remote.process.exec(
                command.script,
                env=env_of(self._spec, env),
                timeout=command.server_timeout_s(self._spec.lifetime_s or _NO_DEADLINE_S),
            )
        except DaytonaTimeoutError as exc:
            return _abnormal(started, True, f"timed out after {timeout_s} s (Daytona: {exc})")
        except DaytonaError as exc:
            if not_found(exc) or not await self.is_alive():
                return _abnormal(started, False, f"sandbox died: {exc}")
            raise SandboxError(f"exec in daytona sandbox {self.id} failed: {exc}") from exc
        return command.parse(str(response.result or ""), time.monotonic() - started)

    async def _must(self, command: str, what: str) -> None:
        result = await self.exec(["/bin/sh", "-c", command], cwd="/", timeout_s=600)
        if not result.ok:
            raise SandboxError(f"{what} in daytona sandbox {self.id} failed: {result.stderr}")

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Upload ``data`` to ``path`` (parents created), then set ``mode``."""
        self._check_open()
        payload = data.encode() if isinstance(data, str) else data
        with daytona_errors(f"writing {path} in daytona sandbox {self.id}"):
            await self._remote.fs.upload_file(payload, path)
            await self._remote.fs.set_file_permissions(path, mode=f"{mode:o}")

    async def read_file(self, path: str) -> bytes:
        """Download ``path``; ``FileNotFoundError`` when it is not there."""
        self._check_open()
        try:
            data = await self._remote.fs.download_file(path)
        except DaytonaError as exc:
            if not_found(exc):
                raise FileNotFoundError(f"{path} is not in daytona sandbox {self.id}") from exc
            raise SandboxError(f"reading {path} in daytona sandbox {self.id}: {exc}") from exc
        return bytes(data or b"")

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy ``local``'s contents into ``remote`` as one tar."""
        self._check_open()
        tar_path = tar_paths()
        with daytona_errors(f"uploading {local} to daytona sandbox {self.id}"):
            await self._remote.fs.upload_file(pack_dir(local), tar_path)
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

    async def is_alive(self) -> bool:
        """Whether Daytona reports it started."""
        if self._closed:
            return False
        try:
            await self._remote.refresh_data()
        except DaytonaError:
            return False
        return bool(self._remote.state == SandboxState.STARTED)

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Freeze its filesystem as Daytona snapshot ``name`` (replacing one of that name)."""
        self._check_open()
        return await self._store.create(self, name)

    async def take_snapshot(self, name: str) -> None:
        """``POST /sandbox/{id}/snapshot`` and wait until it is done (for the store)."""
        try:
            await self._remote.create_snapshot(name, timeout=600)
        except DaytonaError as exc:
            raise SnapshotError(f"daytona snapshot {name!r} of {self.id} failed: {exc}") from exc

    async def close(self) -> None:
        """Delete it at Daytona; a second call, or one after it is gone, does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        try:
            await self._remote.delete()
        except DaytonaError as exc:
            if not not_found(exc):
                raise SandboxError(f"deleting daytona sandbox {self.id} failed: {exc}") from exc


def delete_at_exit(api_url: str, api_key: str, sandbox_id: str) -> Callable[[], None]:
    """A blocking ``DELETE /sandbox/{id}`` for a sandbox dropped or left at process exit
    (its ``ttl_minutes`` ends it anyway if this cannot reach Daytona)."""

    def delete() -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.delete(
                f"{api_url.rstrip('/')}/sandbox/{sandbox_id}",
                headers={"Authorization": f"Bearer {api_key}"},
                timeout=10,
            )

    return delete


def _abnormal(started: float, timed_out: bool, error: str) -> ExecResult:
    return ExecResult(
        stdout="",
        stderr="",
        exit_code=None,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        error=error,
    )
