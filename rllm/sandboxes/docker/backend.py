"""The ``docker`` backend: sandboxes as containers of a local Docker Engine, started with
``network_mode`` none (``network=gateway`` adds a forwarder into the container's network
namespace) or host, never a bridge; images imported from the local store, no registry."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import re
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from rllm.sandboxes.docker.client import connect, docker_errors, remove_container
from rllm.sandboxes.docker.images import build_image, ensure_image, list_images
from rllm.sandboxes.docker.sandbox import DockerSandbox
from rllm.sandboxes.errors import SandboxError, SnapshotError
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL, substitute
from rllm.sandboxes.images.store import ImageStore
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.snapshots import RegistrySnapshots, SnapshotRegistry
from rllm.sandboxes.types import (
    BACKEND_LABEL,
    CREATED_LABEL,
    IMAGE_LABEL,
    ImageInfo,
    NetworkMode,
    SandboxInfo,
    SandboxSpec,
    SnapshotInfo,
    labels_match,
)

__all__ = [
    "CREATED_LABEL",
    "LABELS_LABEL",
    "SNAPSHOT_REPOSITORY",
    "DockerBackend",
    "DockerSnapshots",
]

LABELS_LABEL = "rllm.labels"
"""The spec's own labels as JSON: a container also inherits its image's labels (a
snapshot's carry its source's owner), so matching reads this one."""
SNAPSHOT_REPOSITORY = "rllm-snapshot"
"""Repository of committed snapshots: ``rllm-snapshot:<name>``."""

T = TypeVar("T")

_TAG_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def _snapshot_tag(name: str) -> str:
    tag = _TAG_CHARS.sub("_", name).lstrip(".-")[:100]
    if tag != name:
        tag = f"{tag}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return f"{SNAPSHOT_REPOSITORY}:{tag}"


class DockerSnapshots(RegistrySnapshots):
    """Snapshots of the docker backend: committed images, named in the snapshot registry."""

    backend_name = "docker"
    sandbox_type = DockerSandbox

    def __init__(self, backend: DockerBackend, registry: SnapshotRegistry) -> None:
        super().__init__(registry)
        self._backend = backend

    async def commit(self, sandbox: DockerSandbox, name: str) -> SnapshotInfo:
        """Commit ``sandbox``'s container as ``rllm-snapshot:<name>`` and register it."""
        repository, _, tag = _snapshot_tag(name).partition(":")
        labels = {BACKEND_LABEL: "docker", "rllm.snapshot": name}
        with docker_errors(f"snapshot {name!r}"):
            await self._backend.call(
                self._backend.client.api.commit,
                sandbox.id,
                repository=repository,
                tag=tag,
                conf={"Labels": labels},
            )
        info = SnapshotInfo(
            name=name,
            backend="docker",
            image=f"{repository}:{tag}",
            ttl_s=self._backend.settings.snapshot_ttl_s,
            labels=dict(sandbox.spec.labels),
        )
        return self.registry.register(info)

    async def delete(self, name: str) -> None:
        """Remove the snapshot's image and its registry entry."""
        info = self.registry.get(name)
        if info.backend != "docker":
            raise SnapshotError(
                f"snapshot {name!r} belongs to the {info.backend} backend, not docker"
            )
        import docker  # type: ignore[import-untyped]  # the SDK ships no type hints

        try:
            await self._backend.call(self._backend.client.api.remove_image, info.image, force=True)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            raise SnapshotError(
                f"could not remove snapshot image {info.image}: {exc.explanation}"
            ) from exc
        self.registry.remove(name)


class DockerBackend:
    """Sandboxes as Docker containers (the ``SandboxBackend`` protocol)."""

    name = "docker"

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.client = connect(self.settings.docker_url)
        self._store: ImageStore | None = None
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="rllm-docker")
        self._pool_open = True
        self._live: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
        self._snapshots = DockerSnapshots(self, SnapshotRegistry(self.settings.snapshots_file))

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a blocking SDK call on the backend's threads."""
        bound = functools.partial(fn, *args, **kwargs)
        if not self._pool_open:
            return await asyncio.to_thread(bound)
        return await asyncio.get_running_loop().run_in_executor(self._pool, bound)

    @property
    def store(self) -> ImageStore:
        """The local image store that images are imported from."""
        if self._store is None:
            self._store = ImageStore(self.settings.images_dir)
        return self._store

    @property
    def snapshots(self) -> DockerSnapshots:
        """Committed snapshots."""
        return self._snapshots

    # --- sandboxes ----------------------------------------------------------------------
    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        """A running container for ``spec``; ``ImageError`` for an unknown image."""
        wanted, asked = substitute(spec.image, self.settings.image_substitutes)
        if asked is not None:
            spec = spec.model_copy(update={"labels": {**spec.labels, SUBSTITUTED_LABEL: asked}})
        image = await self.call(ensure_image, self.client, self.store, wanted, self.settings)
        container_id = await self.call(self._create_container, spec, image)
        sandbox = DockerSandbox(self.client, container_id, spec, self.call, self._snapshots.commit)
        try:
            if spec.network == NetworkMode.GATEWAY:
                await sandbox.forward(await self._netns(container_id), spec)
            if spec.user:
                sandbox.owner = await self._own_workdir(sandbox, spec)
        except BaseException:
            await sandbox.close()
            raise
        self._live.add(sandbox)
        return sandbox

    def _create_container(self, spec: SandboxSpec, image: str) -> str:
        api = self.client.api
        lifetime = "infinity" if spec.lifetime_s is None else str(math.ceil(spec.lifetime_s))
        labels = {
            **spec.labels,
            BACKEND_LABEL: "docker",
            CREATED_LABEL: f"{time.time():.3f}",
            LABELS_LABEL: json.dumps(spec.labels, sort_keys=True),
            IMAGE_LABEL: spec.image,
        }
        memory = f"{spec.memory_mb}m" if spec.memory_mb else None
        host_config = api.create_host_config(
            network_mode="host" if spec.network == NetworkMode.HOST else "none",
            init=True,
            mem_limit=memory,
            memswap_limit=memory,
            nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
            pids_limit=spec.pids,
            storage_opt={"size": f"{spec.disk_mb}M"} if spec.disk_mb else None,
            binds={
                str(m.source): {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
                for m in spec.mounts
            }
            or None,
        )
        with docker_errors(f"creating a sandbox from {spec.image!r}", image=image):
            try:
                created = api.create_container(
                    image,
                    command=["sleep", lifetime],
                    labels=labels,
                    working_dir=spec.workdir,
                    environment=spec.env,
                    user=spec.user or "",
                    host_config=host_config,
                )
            except Exception as exc:
                if spec.disk_mb and "storage-opt" in str(exc).lower():
                    raise SandboxError(
                        f"disk_mb={spec.disk_mb} needs a Docker storage driver with size limits "
                        f"(overlay2 on xfs mounted with pquota, or devicemapper/zfs/btrfs); this "
                        f"daemon refused it: {exc}. Leave disk_mb unset, or use the local backend"
                    ) from exc
                raise
            try:
                api.start(created["Id"])
            except Exception:
                remove_container(self.client, created["Id"], [])
                raise
        return str(created["Id"])

    async def _netns(self, container_id: str) -> str:
        with docker_errors("inspecting the new container"):
            state = (await self.call(self.client.api.inspect_container, container_id))["State"]
        return f"/proc/{int(state['Pid'])}/ns/net"

    async def _own_workdir(self, sandbox: DockerSandbox, spec: SandboxSpec) -> tuple[int, int]:
        """Give the workdir to the spec's user; that user's (uid, gid)."""
        result = await sandbox.exec("id -u && id -g", cwd="/")
        ids = result.stdout.split()
        if result.ok and len(ids) == 2:
            script = 'mkdir -p "$1" && chown "$2" "$1"'
            owner = f"{ids[0]}:{ids[1]}"
            argv = ["/bin/sh", "-c", script, "sh", spec.workdir, owner]
            result = await sandbox.exec(argv, user="root", cwd="/")
        if not result.ok or len(ids) != 2:
            raise SandboxError(
                f"could not give the workdir {spec.workdir} to user {spec.user!r}: "
                f"{(result.stderr or result.error or '').strip()}; does the image have that user?"
            )
        return int(ids[0]), int(ids[1])

    async def sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Containers of this backend (any process's, running or not) with ``labels``."""
        with docker_errors("listing sandboxes"):
            found = await self.call(
                self.client.api.containers, all=True, filters={"label": f"{BACKEND_LABEL}=docker"}
            )
        infos = []
        for row in found:
            all_labels = row.get("Labels") or {}
            try:
                own = {**json.loads(all_labels[LABELS_LABEL]), BACKEND_LABEL: "docker"}
            except (KeyError, ValueError, TypeError):
                own = dict(all_labels)
            if not labels_match(own, labels):
                continue
            infos.append(
                SandboxInfo(
                    id=str(row["Id"]),
                    backend="docker",
                    image=all_labels.get(IMAGE_LABEL) or str(row.get("Image")),
                    labels=own,
                    created_at=float(all_labels.get(CREATED_LABEL) or row.get("Created") or 0),
                    alive=row.get("State") == "running",
                )
            )
        return sorted(infos, key=lambda i: i.created_at)

    async def reap(
        self, labels: Mapping[str, str] | None = None, older_than_s: float | None = None
    ) -> list[str]:
        """Remove every container matching ``labels`` (older than ``older_than_s``)."""
        reaped = []
        for info in await self.sandboxes(labels):
            if older_than_s is None or info.age_s >= older_than_s:
                await self.call(remove_container, self.client, info.id, [])
                reaped.append(info.id)
        return reaped

    # --- images -------------------------------------------------------------------------
    async def build_image(self, context_dir: Path, name: str | None = None) -> ImageInfo:
        """Build ``context_dir/Dockerfile`` with docker's builder (host network); its FROM
        images are pulled first per the pull policy."""
        return await self.call(
            build_image, self.client, self.store, Path(context_dir), name, self.settings
        )

    async def images(self) -> list[ImageInfo]:
        """Images imported, built or committed by this backend."""
        return await self.call(list_images, self.client)

    async def aclose(self) -> None:
        """Close the sandboxes this object created and release the client."""
        live = list(self._live)
        await asyncio.gather(*(sandbox.close() for sandbox in live), return_exceptions=True)
        self._pool_open = False
        self._pool.shutdown(wait=False)
        self.client.close()
