"""One Modal sandbox behind the ``Sandbox`` contract: commands through ``Sandbox.exec``
(wrapped by ``remote.RemoteCommand``, so output is bounded and a timeout kills the tree),
files through ``Sandbox.filesystem``, snapshots through ``snapshot_filesystem``."""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import time
import weakref
from collections.abc import Mapping
from typing import Any

from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.hosted import HostedSandbox, HostedSnapshots, abnormal
from rllm.sandboxes.modal.client import modal_errors, not_found
from rllm.sandboxes.remote import RemoteCommand, env_of
from rllm.sandboxes.types import ExecResult, SandboxSpec

__all__ = ["ModalSandbox"]

_SERVICE_TIMEOUT = -1
"""``ContainerProcess.wait()``'s code when Modal's own exec deadline ended the command."""


class ModalSandbox(HostedSandbox):
    """A running Modal sandbox; ``close`` terminates it (idempotent)."""

    service = "modal"

    def __init__(self, sdk: Any, remote: Any, spec: SandboxSpec, store: HostedSnapshots) -> None:
        super().__init__(spec, store)
        self._sdk = sdk
        self._remote = remote
        self._finalizer = weakref.finalize(self, _terminate_blocking, remote)

    @property
    def id(self) -> str:
        """Modal's sandbox id (``sb-...``)."""
        return str(self._remote.object_id)

    @property
    def remote(self) -> Any:
        """The SDK's ``modal.Sandbox``."""
        return self._remote

    async def _upload(self, data: bytes, path: str) -> None:
        with modal_errors(self._sdk, f"uploading {path} to modal sandbox {self.id}"):
            await self._remote.filesystem.write_bytes.aio(data, path)

    async def _execute(
        self, command: RemoteCommand, env: Mapping[str, str] | None, started: float
    ) -> ExecResult:
        try:
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
                return abnormal(started, False, f"sandbox died: {exc}")
            raise SandboxError(f"exec in modal sandbox {self.id} failed: {exc}") from exc
        if code == _SERVICE_TIMEOUT:
            return abnormal(
                started, True, f"timed out after {command.timeout_s} s (Modal's deadline)"
            )
        return command.parse(str(output), time.monotonic() - started)

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

    async def is_alive(self) -> bool:
        """Whether Modal says it still runs (``poll()`` is None)."""
        if self._closed:
            return False
        try:
            return bool(await self._remote.poll.aio() is None)
        except self._sdk.exception.Error:
            return False

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
