"""One Modal sandbox behind the ``Sandbox`` contract: commands through ``Sandbox.exec``
(wrapped by ``remote.RemoteCommand``, so output is bounded and a timeout kills the tree),
files through ``Sandbox.filesystem``, snapshots through ``snapshot_filesystem``."""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rllm.sandboxes.errors import SandboxClosedError, SandboxError
from rllm.sandboxes.modal.client import modal_errors, not_found
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
    from rllm.sandboxes.modal.backend import ModalSnapshots

__all__ = ["ModalSandbox"]

_SERVICE_TIMEOUT = -1
"""``ContainerProcess.wait()``'s code when Modal's own exec deadline ended the command."""


class ModalSandbox:
    """A running Modal sandbox; ``close`` terminates it (idempotent)."""

    def __init__(self, sdk: Any, remote: Any, spec: SandboxSpec, store: ModalSnapshots) -> None:
        self._sdk = sdk
        self._remote = remote
        self._spec = spec
        self._store = store
        self._closed = False
        self._finalizer = weakref.finalize(self, _terminate_blocking, remote)

    @property
    def id(self) -> str:
        """Modal's sandbox id (``sb-...``)."""
        return str(self._remote.object_id)

    @property
    def spec(self) -> SandboxSpec:
        """What it was created from."""
        return self._spec

    @property
    def remote(self) -> Any:
        """The SDK's ``modal.Sandbox``."""
        return self._remote

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"modal sandbox {self.id} is closed")

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
                f"cannot create workdir {self._spec.workdir} in modal sandbox {self.id}: "
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
        try:
            if command.stdin_path is not None and stdin is not None:
                data = stdin.encode() if isinstance(stdin, str) else stdin
                await self._remote.filesystem.write_bytes.aio(data, command.stdin_path)
            process = await self._remote.exec.aio(
                "/bin/sh",
                "-c",
                command.script,
                timeout=command.server_timeout_s(self._spec.lifetime_s or 86400.0),
                env=env_of(self._spec, env),
                text=True,
            )
            output = await process.stdout.read.aio()
            code = await process.wait.aio()
        except self._sdk.exception.Error as exc:
            if not_found(self._sdk, exc):
                return _abnormal(started, False, f"sandbox died: {exc}")
            raise SandboxError(f"exec in modal sandbox {self.id} failed: {exc}") from exc
        if code == _SERVICE_TIMEOUT:
            return _abnormal(started, True, f"timed out after {timeout_s} s (Modal's deadline)")
        return command.parse(str(output), time.monotonic() - started)

    async def _must(self, command: str, what: str) -> None:
        result = await self.exec(["/bin/sh", "-c", command], cwd="/", timeout_s=600)
        if not result.ok:
            raise SandboxError(f"{what} in modal sandbox {self.id} failed: {result.stderr}")

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` (parents created), then set ``mode``."""
        self._check_open()
        payload = data.encode() if isinstance(data, str) else data
        with modal_errors(self._sdk, f"writing {path} in modal sandbox {self.id}"):
            fs = self._remote.filesystem
            await fs.make_directory.aio(posixpath.dirname(path) or "/", create_parents=True)
            await fs.write_bytes.aio(payload, path)
        await self._must(f"chmod {mode:o} {shlex.quote(path)}", f"chmod of {path}")

    async def read_file(self, path: str) -> bytes:
        """Read ``path``; ``FileNotFoundError`` when it is not there."""
        self._check_open()
        try:
            data = await self._remote.filesystem.read_bytes.aio(path)
        except self._sdk.exception.Error as exc:
            if not_found(self._sdk, exc):
                raise FileNotFoundError(f"{path} is not in modal sandbox {self.id}") from exc
            raise SandboxError(f"reading {path} in modal sandbox {self.id}: {exc}") from exc
        return bytes(data)

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy ``local``'s contents into ``remote`` as one tar."""
        self._check_open()
        tar_path = tar_paths()
        with modal_errors(self._sdk, f"uploading {local} to modal sandbox {self.id}"):
            await self._remote.filesystem.write_bytes.aio(pack_dir(local), tar_path)
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
        """Whether Modal says it still runs (``poll()`` is None)."""
        if self._closed:
            return False
        try:
            return bool(await self._remote.poll.aio() is None)
        except self._sdk.exception.Error:
            return False

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Freeze its filesystem (``snapshot_filesystem``) as ``name``."""
        self._check_open()
        return await self._store.create(self, name)

    async def close(self) -> None:
        """Terminate it at Modal; a second call, or one after it ended, does nothing."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        try:
            await self._remote.terminate.aio()
        except self._sdk.exception.Error as exc:
            if not not_found(self._sdk, exc):
                raise SandboxError(f"terminating modal sandbox {self.id}: {exc}") from exc


def _terminate_blocking(remote: Any) -> None:
    """Terminate a sandbox dropped or left at process exit, with Modal's blocking API
    (its ``timeout`` ends it anyway if this fails)."""
    with contextlib.suppress(Exception):
        remote.terminate()


def _abnormal(started: float, timed_out: bool, error: str) -> ExecResult:
    return ExecResult(
        stdout="",
        stderr="",
        exit_code=None,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        error=error,
    )
