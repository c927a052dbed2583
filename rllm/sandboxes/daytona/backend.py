"""The ``daytona`` backend: sandboxes on Daytona through its ``AsyncDaytona`` SDK.

A spec maps onto ``CreateSandboxFromSnapshotParams`` (a Daytona snapshot, ours or one made
by ``build_image``) or ``CreateSandboxFromImageParams`` (a registry image, with whole-CPU
and whole-GiB resources); ``network=none`` is ``network_block_all``, the lifetime is
``ttl_minutes`` with ``auto_delete_interval=0`` (a stopped sandbox is deleted). Every
sandbox carries the ``rllm.backend=daytona`` label, which ``sandboxes`` and ``reap`` list by.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from daytona import (
    AsyncDaytona,
    AsyncSandbox,
    CreateSandboxFromImageParams,
    CreateSandboxFromSnapshotParams,
    CreateSnapshotParams,
    DaytonaAuthenticationError,
    DaytonaError,
    DaytonaForbiddenError,
    Image,
    ListSandboxesQuery,
    Resources,
)
from daytona_api_client_async import SandboxState

from rllm.errors import ConfigError
from rllm.sandboxes.daytona.client import daytona_config, daytona_errors, make_client, not_found
from rllm.sandboxes.daytona.sandbox import DaytonaSandbox, delete_at_exit
from rllm.sandboxes.daytona.snapshots import NAME, DaytonaSnapshots
from rllm.sandboxes.errors import ImageError, SandboxError
from rllm.sandboxes.hosted import HostedBackend
from rllm.sandboxes.remote import check_spec, whole_units
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import ImageInfo, NetworkMode, SandboxInfo, SandboxSpec, SnapshotInfo

__all__ = ["DaytonaBackend"]


class DaytonaBackend(HostedBackend):
    """Creates sandboxes on Daytona (``get_backend("daytona")``).

    Args:
        settings: ``daytona_api_key`` (or ``DAYTONA_API_KEY``), ``daytona_api_url``,
            ``daytona_target``, and the snapshot registry's place.
        client: an ``AsyncDaytona`` to use instead of one made from ``settings``.
    """

    name = NAME
    snapshots_type = DaytonaSnapshots

    def __init__(self, settings: SandboxSettings, client: AsyncDaytona | None = None) -> None:
        if client is None:
            daytona_config(settings)  # fail now, naming the missing key
        super().__init__(settings)
        self._client = client

    async def client(self) -> AsyncDaytona:
        """The SDK client (made on first use, inside the running loop)."""
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    async def create(self, spec: SandboxSpec) -> DaytonaSandbox:
        """A started Daytona sandbox for ``spec``, its workdir created."""
        check_spec(spec, NAME, disk=True)
        client = await self.client()
        params = await self._params(client, spec)
        with daytona_errors(f"creating a daytona sandbox from {spec.image!r}"):
            try:
                remote = await client.create(params, timeout=300)
            except DaytonaError as exc:
                await self._delete_named(client, params.name)
                if "build_failed" in str(exc).lower():
                    raise ImageError(
                        f"daytona could not build image {spec.image!r}: {exc}; check the name "
                        "(a registry image Daytona can pull, or a snapshot)"
                    ) from exc
                raise
        config = daytona_config(self.settings)
        api_url = config.api_url or "https://app.daytona.io/api"
        finalizer = delete_at_exit(api_url, config.api_key or "", remote.id)
        return await self._started(DaytonaSandbox(remote, spec, self._snapshots, finalizer))

    async def _params(
        self, client: AsyncDaytona, spec: SandboxSpec
    ) -> CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams:
        common: dict[str, Any] = {
            "name": f"rllm-{uuid.uuid4().hex[:20]}",
            "env_vars": dict(spec.env),
            "labels": self._new_labels(spec),
            "network_block_all": spec.network == NetworkMode.NONE,
            "auto_delete_interval": 0,
        }
        if spec.lifetime_s is not None:
            common["ttl_minutes"] = max(1, math.ceil(spec.lifetime_s / 60))
        if await self._is_snapshot(client, spec.image):
            if spec.cpus is not None or spec.memory_mb is not None or spec.disk_mb is not None:
                raise ConfigError(
                    f"a daytona sandbox from snapshot {spec.image!r} has the snapshot's "
                    "resources; cpus/memory_mb/disk_mb cannot be honoured: leave them None "
                    "or build the snapshot with them"
                )
            return CreateSandboxFromSnapshotParams(snapshot=spec.image, **common)
        resources = None
        if spec.cpus is not None or spec.memory_mb is not None or spec.disk_mb is not None:
            if spec.cpus is not None and spec.cpus != int(spec.cpus):
                raise ConfigError(
                    f"daytona allocates whole CPUs; cpus={spec.cpus} cannot be honoured: "
                    f"ask for {max(1, math.floor(spec.cpus))} or {math.ceil(spec.cpus)}"
                )
            resources = Resources(
                cpu=int(spec.cpus) if spec.cpus is not None else None,
                memory=whole_units(spec.memory_mb, 1024, "memory_mb", NAME),
                disk=whole_units(spec.disk_mb, 1024, "disk_mb", NAME),
            )
        return CreateSandboxFromImageParams(image=spec.image, resources=resources, **common)

    async def _delete_named(self, client: AsyncDaytona, name: str | None) -> None:
        """Delete the sandbox a failed create left behind (Daytona keeps it, in error)."""
        if name is None:
            return
        with contextlib.suppress(DaytonaError):
            await (await client.get(name)).delete()

    async def _is_snapshot(self, client: AsyncDaytona, image: str) -> bool:
        if any(i.image == image for i in self.registry_snapshots()):
            return True
        with daytona_errors(f"looking up daytona snapshot {image!r}"):
            try:
                await client.snapshot.get(image)
            except DaytonaError as exc:
                if not_found(exc):
                    return False
                raise
        return True

    def registry_snapshots(self) -> list[SnapshotInfo]:
        """Unexpired daytona snapshots of the registry."""
        return [i for i in self.snapshots.registry.all(NAME) if not i.expired]

    async def build_image(self, context_dir: Path, name: str | None = None) -> ImageInfo:
        """Build ``context_dir/Dockerfile`` into a Daytona snapshot (``Image.from_dockerfile``:
        the SDK uploads the files its COPY/ADD lines name to Daytona's object storage)."""
        dockerfile, name = self._dockerfile(context_dir, name)
        client = await self.client()
        with daytona_errors(f"building {dockerfile} as daytona snapshot {name!r}"):
            try:
                image = Image.from_dockerfile(dockerfile)
                snap = await client.snapshot.create(CreateSnapshotParams(name=name, image=image))
            except (DaytonaAuthenticationError, DaytonaForbiddenError):
                raise
            except DaytonaError as exc:
                raise ImageError(f"daytona could not build {dockerfile}: {exc}") from exc
        return ImageInfo(name=snap.name, backend=NAME, id=snap.id, created_at=time.time())

    async def images(self) -> list[ImageInfo]:
        """Daytona's snapshots (what sandboxes can start from), first page of 200."""
        client = await self.client()
        with daytona_errors("listing daytona snapshots"):
            page = await client.snapshot.list(limit=200)
        return [
            ImageInfo(
                name=s.name,
                backend=NAME,
                id=s.id,
                size_bytes=int(s.size * 2**30) if s.size else None,
                created_at=s.created_at.timestamp() if s.created_at else None,
            )
            for s in page.items
        ]

    async def _listed(self, wanted: dict[str, str]) -> AsyncIterator[SandboxInfo]:
        """Daytona sandboxes with the ``wanted`` labels, the destroyed ones left out."""
        client = await self.client()
        with daytona_errors("listing daytona sandboxes"):
            async for remote in client.list(ListSandboxesQuery(labels=wanted)):
                if remote.state != SandboxState.DESTROYED:
                    yield self._info(
                        remote.id,
                        remote.labels or {},
                        _created_at(remote),
                        image=remote.snapshot or "",
                        alive=remote.state == SandboxState.STARTED,
                    )

    async def _delete(self, sandbox_id: str) -> None:
        client = await self.client()
        try:
            await (await client.get(sandbox_id)).delete()
        except DaytonaError as exc:
            if not not_found(exc):
                raise SandboxError(f"reaping daytona sandbox {sandbox_id}: {exc}") from exc

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.close()  # type: ignore[no-untyped-call]  # SDK lacks -> None
            self._client = None


def _created_at(remote: AsyncSandbox) -> float:
    if not remote.created_at:
        return time.time()
    return datetime.fromisoformat(remote.created_at.replace("Z", "+00:00")).timestamp()
