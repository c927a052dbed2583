"""The ``modal`` backend: sandboxes on Modal through the ``modal`` SDK's async API
(``.aio``), under one app (``settings.modal_app``).

A spec maps onto ``modal.Sandbox.create``: the image is ``Image.from_registry(name)``, or
``Image.from_id`` for a snapshot or built image (``im-...``, or its name in the snapshot
registry); ``cpu``/``memory`` as asked (Modal has no disk or process limit: those are
refused); ``network=none`` is ``block_network=True``; the lifetime is ``timeout`` (at most
Modal's 24 h); labels are Modal tags, with ``rllm.backend=modal``, which ``sandboxes`` and
``reap`` list by. Snapshots are ``snapshot_filesystem()`` images, recorded in the registry.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from rllm.errors import ConfigError
from rllm.sandboxes.errors import ImageError, SandboxError, SnapshotError
from rllm.sandboxes.hosted import HostedBackend, HostedSnapshots
from rllm.sandboxes.modal.client import load_sdk, make_client, modal_errors, not_found, token
from rllm.sandboxes.modal.sandbox import ModalSandbox
from rllm.sandboxes.remote import check_spec
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import (
    CREATED_LABEL,
    ImageInfo,
    NetworkMode,
    SandboxInfo,
    SandboxSpec,
    SnapshotInfo,
)

__all__ = ["MAX_LIFETIME_S", "ModalBackend", "ModalSnapshots"]

NAME = "modal"
MAX_LIFETIME_S = 24 * 3600
"""Modal's longest sandbox ``timeout``."""


class ModalSnapshots(HostedSnapshots):
    """Modal filesystem snapshots, by name in the shared snapshot registry."""

    backend_name = NAME
    sandbox_type = ModalSandbox
    backend: ModalBackend

    async def _take(self, sandbox: ModalSandbox, name: str) -> str:
        """``snapshot_filesystem()`` of ``sandbox``; its image id."""
        ttl = self.backend.settings.snapshot_ttl_s
        sdk = self.backend.sdk
        try:
            image = await sandbox.remote.snapshot_filesystem.aio(
                timeout=300, ttl=int(ttl) if ttl is not None else None
            )
        except sdk.exception.Error as exc:
            raise SnapshotError(f"modal snapshot {name!r} of {sandbox.id} failed: {exc}") from exc
        return str(image.object_id)

    async def delete(self, name: str) -> None:
        """Forget snapshot ``name`` (Modal expires the image itself at its TTL).

        Raises:
            SnapshotError: no modal snapshot has that name.
        """
        if not any(i.name == name for i in self.registry.all(NAME)):
            raise SnapshotError(f"no modal snapshot named {name!r} in {self.registry.path}")
        self.registry.remove(name)


class ModalBackend(HostedBackend):
    """Creates sandboxes on Modal (``get_backend("modal")``).

    Args:
        settings: ``modal_token_id`` / ``modal_token_secret`` (or ``MODAL_TOKEN_ID`` /
            ``MODAL_TOKEN_SECRET``), ``modal_app``, and the snapshot registry's place.
        sdk: the ``modal`` module to use (tests pass a fake); default the installed one.
    """

    name = NAME
    snapshots_type = ModalSnapshots

    def __init__(self, settings: SandboxSettings, sdk: Any | None = None) -> None:
        token(settings)  # fail now, naming what is missing
        super().__init__(settings)
        self.sdk = load_sdk(sdk)
        self._client: Any | None = None
        self._app: Any | None = None

    async def _context(self) -> tuple[Any, Any]:
        if self._client is None:
            self._client = make_client(self.sdk, self.settings)
        if self._app is None:
            with modal_errors(self.sdk, f"looking up Modal app {self.settings.modal_app!r}"):
                self._app = await self.sdk.App.lookup.aio(
                    self.settings.modal_app, create_if_missing=True, client=self._client
                )
        return self._client, self._app

    async def _image(self, name: str, client: Any) -> Any:
        image_id = name
        for info in self.snapshots.registry.all(NAME):
            if info.name == name and not info.expired:
                image_id = info.image
        if image_id.startswith("im-"):
            with modal_errors(self.sdk, f"looking up Modal image {image_id!r}"):
                return await self.sdk.Image.from_id.aio(image_id, client=client)
        return self.sdk.Image.from_registry(name)

    async def create(self, spec: SandboxSpec) -> ModalSandbox:
        """A running Modal sandbox for ``spec``, its workdir created."""
        check_spec(spec, NAME, disk=False)
        if spec.lifetime_s is None or spec.lifetime_s > MAX_LIFETIME_S:
            raise ConfigError(
                f"modal sandboxes live at most {MAX_LIFETIME_S} s; lifetime_s={spec.lifetime_s} "
                f"cannot be honoured: give lifetime_s <= {MAX_LIFETIME_S}"
            )
        client, app = await self._context()
        image = await self._image(spec.image, client)
        tags = {**self._new_labels(spec), CREATED_LABEL: f"{time.time():.3f}"}
        try:
            remote = await self.sdk.Sandbox.create.aio(
                app=app,
                image=image,
                env=dict(spec.env),
                tags=tags,
                timeout=math.ceil(spec.lifetime_s),
                cpu=spec.cpus,
                memory=spec.memory_mb,
                block_network=spec.network == NetworkMode.NONE,
                client=client,
            )
        except (self.sdk.exception.NotFoundError, self.sdk.exception.ImageBuildError) as exc:
            raise ImageError(f"modal cannot start image {spec.image!r}: {exc}") from exc
        except self.sdk.exception.Error as exc:
            raise SandboxError(f"creating a modal sandbox from {spec.image!r}: {exc}") from exc
        return await self._started(ModalSandbox(self.sdk, remote, spec, self._snapshots))

    async def build_image(self, context_dir: Path, name: str | None = None) -> ImageInfo:
        """Build ``context_dir/Dockerfile`` with ``Image.from_dockerfile`` (Modal builds it;
        COPY/ADD read ``context_dir``), registered by ``name`` so specs can name it."""
        dockerfile, name = self._dockerfile(context_dir, name)
        _client, app = await self._context()
        with modal_errors(self.sdk, f"building {dockerfile} on Modal"):
            image = self.sdk.Image.from_dockerfile(dockerfile, context_dir=context_dir)
            try:
                await image.build.aio(app)
            except self.sdk.exception.ImageBuildError as exc:
                raise ImageError(f"modal could not build {dockerfile}: {exc}") from exc
        image_id = str(image.object_id)
        self.snapshots.registry.register(
            SnapshotInfo(name=name, backend=NAME, image=image_id, labels={"rllm.kind": "image"})
        )
        return ImageInfo(name=name, backend=NAME, id=image_id, created_at=time.time())

    async def images(self) -> list[ImageInfo]:
        """Built images and snapshots of the registry (Modal cannot list images)."""
        return [
            ImageInfo(name=i.name, backend=NAME, id=i.image, created_at=i.created_at)
            for i in self.snapshots.registry.all(NAME)
            if not i.expired
        ]

    async def _listed(self, wanted: dict[str, str]) -> AsyncIterator[SandboxInfo]:
        """Running sandboxes of the app tagged with the ``wanted`` labels."""
        client, app = await self._context()
        with modal_errors(self.sdk, "listing modal sandboxes"):
            async for remote in self.sdk.Sandbox.list.aio(
                app_id=app.app_id, tags=wanted, client=client
            ):
                tags = dict(await remote.get_tags.aio())
                yield self._info(str(remote.object_id), tags, _created_at(tags))

    async def _delete(self, sandbox_id: str) -> None:
        client, _app = await self._context()
        try:
            remote = await self.sdk.Sandbox.from_id.aio(sandbox_id, client=client)
            await remote.terminate.aio()
        except self.sdk.exception.Error as exc:
            if not not_found(self.sdk, exc):
                raise SandboxError(f"reaping modal sandbox {sandbox_id}: {exc}") from exc

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.close.aio()
            self._client = None
            self._app = None


def _created_at(tags: Mapping[str, str]) -> float:
    try:
        return float(tags.get(CREATED_LABEL, ""))
    except ValueError:
        return time.time()
