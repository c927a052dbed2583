"""What a hosted service's backend (daytona, modal) does the same way whatever the service.

Its sandboxes run every command through ``remote.RemoteCommand`` (bounded output, the tree
killed on timeout, the user switched, stdin uploaded first), copy directories as one tar
each way and make the spec's workdir at start. Its backend keeps the sandboxes it made
(closed by ``aclose``, by ``reap`` when they match) and its snapshots in the shared
registry. A service's classes supply only its calls: create, upload a file, execute a
script, read a file, take a snapshot, list sandboxes by label, delete one by id, close the
client."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from rllm.sandboxes.base import ExecRequest, SandboxBase
from rllm.sandboxes.errors import ImageError, SandboxClosedError, SandboxError
from rllm.sandboxes.remote import (
    RemoteCommand,
    pack_dir,
    tar_command,
    tar_paths,
    unpack_dir,
    untar_command,
    workdir_command,
)
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.snapshots import RegistrySnapshots, SnapshotRegistry, snapshot_key
from rllm.sandboxes.types import (
    BACKEND_LABEL,
    IMAGE_LABEL,
    ExecResult,
    Sandbox,
    SandboxInfo,
    SandboxSpec,
    SnapshotInfo,
    labels_match,
)

__all__ = ["HostedBackend", "HostedSandbox", "HostedSnapshots", "abnormal"]

S = TypeVar("S", bound="HostedSandbox")


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


class HostedSandbox(SandboxBase):
    """The shared part of a hosted service's sandbox (see ``types.Sandbox``)."""

    service: str = "hosted"
    """The service's name in messages (``daytona``, ``modal``)."""

    def __init__(self, spec: SandboxSpec, store: HostedSnapshots) -> None:
        self._spec = spec
        self._store = store
        self._closed = False

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

    @abstractmethod
    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` (parents created), then set ``mode``."""

    @abstractmethod
    async def is_alive(self) -> bool:
        """Whether the service says it still runs."""

    @abstractmethod
    async def close(self) -> None:
        """End it at the service; a second call, or one after it is gone, does nothing."""

    # --- the same everywhere ---------------------------------------------------------
    async def _exec(self, request: ExecRequest) -> ExecResult:
        return await self._run(request._replace(user=request.user or self._spec.user))

    async def prepare(self) -> None:
        """Create the spec's workdir (as the image's user), owned by the spec's user."""
        command = workdir_command(self._spec.workdir, self._spec.user)
        made = await self._run(ExecRequest(["/bin/sh", "-c", command], "/", None, 60, None, None))
        if not made.ok:
            raise SandboxError(
                f"cannot create workdir {self._spec.workdir} in {self.service} sandbox "
                f"{self.id}: {made.stderr.strip() or made.error}"
            )

    async def _run(self, request: ExecRequest) -> ExecResult:
        self._check_open()
        cmd, cwd, env, timeout_s, user, stdin = request
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
            await self._upload(
                stdin.encode() if isinstance(stdin, str) else stdin, command.stdin_path
            )
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
        return await self._store.create(self, name)


class HostedSnapshots(RegistrySnapshots, ABC):
    """A hosted service's snapshots, each recorded in the shared snapshot registry too."""

    def __init__(self, backend: HostedBackend, registry: SnapshotRegistry) -> None:
        super().__init__(registry)
        self.backend = backend

    @abstractmethod
    async def _take(self, sandbox: Any, name: str) -> str:
        """Snapshot ``sandbox`` at the service as ``name``; what ``SnapshotInfo.image``
        holds to start from it (raises SnapshotError)."""

    @abstractmethod
    async def delete(self, name: str) -> None:
        """Remove snapshot ``name`` (``SnapshotError`` when it is unknown)."""

    async def create(self, sandbox: Sandbox, name: str) -> SnapshotInfo:
        """Snapshot one of the service's sandboxes as ``name``, registered by that name."""
        self._check_kind(sandbox)
        info = SnapshotInfo(
            name=name,
            backend=self.backend_name,
            image=await self._take(sandbox, name),
            ttl_s=self.backend.settings.snapshot_ttl_s,
            labels=dict(sandbox.spec.labels),
        )
        return self.registry.register(info)


class HostedBackend(ABC):
    """The shared part of a hosted service's backend (see ``types.SandboxBackend``).

    Args:
        settings: the service's keys and the snapshot registry's place.
    """

    name: str = "hosted"
    """The backend's registry name (``daytona``, ``modal``)."""
    snapshots_type: type[HostedSnapshots]
    """The service's snapshot store class."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self._snapshots = self.snapshots_type(self, SnapshotRegistry(settings.snapshots_file))
        self._open: dict[str, HostedSandbox] = {}

    @property
    def snapshots(self) -> HostedSnapshots:
        """Its snapshots."""
        return self._snapshots

    def _new_labels(self, spec: SandboxSpec) -> dict[str, str]:
        """The labels a new sandbox carries: the spec's, this backend's mark and the image."""
        return {**spec.labels, BACKEND_LABEL: self.name, IMAGE_LABEL: spec.image}

    def _wanted(self, labels: Mapping[str, str] | None) -> dict[str, str]:
        """What ``sandboxes(labels)`` lists: ``labels`` and this backend's mark."""
        return {**(labels or {}), BACKEND_LABEL: self.name}

    def _info(
        self,
        sandbox_id: str,
        labels: Mapping[str, str],
        created_at: float,
        image: str = "",
        alive: bool = True,
    ) -> SandboxInfo:
        """What ``sandboxes`` says of one of its sandboxes: its image is the label
        ``_new_labels`` put on it, else ``image``."""
        return SandboxInfo(
            id=sandbox_id,
            backend=self.name,
            image=labels.get(IMAGE_LABEL) or image,
            labels=dict(labels),
            created_at=created_at,
            alive=alive,
        )

    # --- what each service supplies ---------------------------------------------------
    @abstractmethod
    def _listed(self, wanted: dict[str, str]) -> AsyncIterator[SandboxInfo]:
        """The service's live sandboxes, asked for by ``wanted`` labels; the service's own
        filter may be looser, ``sandboxes`` matches each again."""

    @abstractmethod
    async def _delete(self, sandbox_id: str) -> None:
        """Delete a sandbox this object did not make; one already gone is no error."""

    @abstractmethod
    async def _close_client(self) -> None:
        """Close the SDK's client, if one was made."""

    # --- the same everywhere ---------------------------------------------------------
    async def sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """The service's sandboxes of this backend (and ``labels``)."""
        wanted = self._wanted(labels)
        return [info async for info in self._listed(wanted) if labels_match(info.labels, wanted)]

    async def _started(self, sandbox: S) -> S:
        """``sandbox``, just created, kept for ``aclose`` and prepared (closed on failure)."""
        self._open[sandbox.id] = sandbox
        try:
            await sandbox.prepare()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    def _dockerfile(self, context_dir: Path, name: str | None) -> tuple[Path, str]:
        """``context_dir``'s Dockerfile and the image's name (default: its content key)."""
        dockerfile = context_dir / "Dockerfile"
        if not dockerfile.is_file():
            raise ImageError(f"no Dockerfile in {context_dir}; build_image needs one")
        return dockerfile, name or "rllm-" + snapshot_key(
            self.name, "dockerfile", dockerfile.read_text()
        )

    async def reap(
        self, labels: Mapping[str, str] | None = None, older_than_s: float | None = None
    ) -> list[str]:
        """Delete every matching sandbox older than ``older_than_s``; the ids deleted."""
        closed: list[str] = []
        for info in await self.sandboxes(labels):
            if older_than_s is not None and info.age_s < older_than_s:
                continue
            mine = self._open.pop(info.id, None)
            if mine is not None:
                await mine.close()
            else:
                await self._delete(info.id)
            closed.append(info.id)
        return closed

    async def aclose(self) -> None:
        """Delete the sandboxes this object created, then close the SDK's client."""
        open_now, self._open = list(self._open.values()), {}
        for sandbox in open_now:
            await sandbox.close()
        await self._close_client()
