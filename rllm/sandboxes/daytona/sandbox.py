"""One Daytona sandbox behind the ``Sandbox`` contract: commands through the toolbox's
``/process/execute`` (wrapped by ``remote.RemoteCommand``), files through its file API,
snapshots through ``POST /sandbox/{id}/snapshot``."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Mapping

import httpx
from daytona import AsyncSandbox, DaytonaError, DaytonaTimeoutError
from daytona_api_client_async import SandboxState

from rllm.sandboxes.daytona.client import daytona_errors, not_found
from rllm.sandboxes.errors import SandboxError, SnapshotError
from rllm.sandboxes.hosted import HostedSandbox, HostedSnapshots, abnormal
from rllm.sandboxes.remote import RemoteCommand, env_of
from rllm.sandboxes.types import ExecResult, SandboxSpec

__all__ = ["DaytonaSandbox", "delete_at_exit"]

_NO_DEADLINE_S = 24 * 3600.0
"""The service-side exec deadline of a command without a timeout (one must always be sent:
Daytona's default is 10 s)."""


class DaytonaSandbox(HostedSandbox):
    """A running Daytona sandbox; ``close`` deletes it (idempotent)."""

    service = "daytona"

    def __init__(
        self,
        remote: AsyncSandbox,
        spec: SandboxSpec,
        store: HostedSnapshots,
        finalizer: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(spec, store)
        self._remote = remote
        self._finalizer = weakref.finalize(self, finalizer) if finalizer else None

    @property
    def id(self) -> str:
        """Daytona's sandbox id."""
        return str(self._remote.id)

    async def _upload(self, data: bytes, path: str) -> None:
        with daytona_errors(f"uploading {path} to daytona sandbox {self.id}"):
            await self._remote.fs.upload_file(data, path)

    async def _execute(
        self, command: RemoteCommand, env: Mapping[str, str] | None, started: float
    ) -> ExecResult:
        try:
            response = await self._remote.process.exec(
                command.script,
                env=env_of(self._spec, env),
                timeout=command.server_timeout_s(self._spec.lifetime_s or _NO_DEADLINE_S),
            )
        except DaytonaTimeoutError as exc:
            return abnormal(
                started, True, f"timed out after {command.timeout_s} s (Daytona: {exc})"
            )
        except DaytonaError as exc:
            if not_found(exc) or not await self.is_alive():
                return abnormal(started, False, f"sandbox died: {exc}")
            raise SandboxError(f"exec in daytona sandbox {self.id} failed: {exc}") from exc
        return command.parse(str(response.result or ""), time.monotonic() - started)

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

    async def is_alive(self) -> bool:
        """Whether Daytona reports it started."""
        if self._closed:
            return False
        try:
            await self._remote.refresh_data()
        except DaytonaError:
            return False
        return bool(self._remote.state == SandboxState.STARTED)

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
