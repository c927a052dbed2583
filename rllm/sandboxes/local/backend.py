"""The ``local`` sandbox backend: bubblewrap over a kernel overlay, no daemon.

Creating a sandbox mounts an overlay of its image's layers (copying nothing), makes its
cgroups, and starts one bubblewrap process; commands enter it with
``rllm-sandbox-enter`` (Docker's default privileges: ``privileges``). Leaked
sandboxes (their owner died) are found from the state files under ``run_dir`` and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from rllm.sandboxes.errors import ImageError, RegistryUnreachableError
from rllm.sandboxes.forward import GatewayForwarder, gateway_address
from rllm.sandboxes.images.base import BASE_IMAGES, ensure_base
from rllm.sandboxes.images.derived import offline_images
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL, find_or_pull, substitute
from rllm.sandboxes.images.store import ImageConfig, ImageStore
from rllm.sandboxes.local.exec import Entry
from rllm.sandboxes.local.files import SandboxFiles
from rllm.sandboxes.local.limits import SandboxCgroups
from rllm.sandboxes.local.overlay import bind_mounts, mount_rootfs
from rllm.sandboxes.local.privileges import IdMap, enter_program, seccomp_filter
from rllm.sandboxes.local.process import (
    BwrapProcess,
    Start,
    bwrap_argv,
    join_cgroups,
    require_tools,
    setup_sysfs,
    spawn,
    under_dev,
)
from rllm.sandboxes.local.sandbox import LocalSandbox, SandboxParts
from rllm.sandboxes.local.state import SandboxState, process_start, read_states, teardown
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.snapshots import RegistrySnapshots, SnapshotRegistry
from rllm.sandboxes.types import (
    BACKEND_LABEL,
    ImageInfo,
    NetworkMode,
    SandboxInfo,
    SandboxSpec,
    labels_match,
)

__all__ = ["LocalBackend", "LocalSnapshots"]

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class LocalSnapshots(RegistrySnapshots):
    """Local snapshots: images in the store, entries in the snapshot registry."""

    backend_name = "local"
    sandbox_type = LocalSandbox

    def __init__(self, store: ImageStore, registry: SnapshotRegistry) -> None:
        super().__init__(registry)
        self.store = store

    async def delete(self, name: str) -> None:
        """Forget snapshot ``name`` and its image; ``SnapshotError`` when unknown."""
        await asyncio.to_thread(self.registry.remove, name)
        with contextlib.suppress(ImageError):
            await asyncio.to_thread(self.store.delete, name)


class LocalBackend:
    """Sandboxes on this machine (see ``rllm.sandboxes.types.SandboxBackend``)."""

    name = "local"

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        """Raises ``SandboxUnavailableError`` when bubblewrap, root or overlayfs is missing."""
        self.settings = settings or SandboxSettings()
        self._tools = require_tools()
        self._enter = enter_program()
        self._seccomp = seccomp_filter()
        self.idmap = IdMap(self.settings.id_base)
        """Sandbox ids 0..65535 are host ids ``id_base``.. (never host root)."""
        self.store = ImageStore(self.settings.images_dir)
        self._snapshots = LocalSnapshots(self.store, SnapshotRegistry(self.settings.snapshots_file))
        self._live: weakref.WeakValueDictionary[str, LocalSandbox] = weakref.WeakValueDictionary()

    @property
    def snapshots(self) -> LocalSnapshots:
        """Its snapshots."""
        return self._snapshots

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        """A running sandbox for ``spec``; ``ImageError`` for an unknown image."""
        image, wanted = substitute(spec.image, self.settings.image_substitutes)
        layers, config, layer_ids = await asyncio.to_thread(self._resolve_image, image)
        substituted = {SUBSTITUTED_LABEL: wanted} if wanted else {}
        target = None
        if spec.network == NetworkMode.GATEWAY and spec.gateway_url:
            target = gateway_address(spec.gateway_url)
        workdir = (
            config.workdir
            if config.workdir and "workdir" not in spec.model_fields_set
            else spec.workdir
        )
        sandbox_id = uuid.uuid4().hex[:12]
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": sandbox_id, **config.env, **spec.env}
        state = SandboxState(
            id=sandbox_id,
            image=spec.image,
            labels={**spec.labels, BACKEND_LABEL: self.name, **substituted},
            created_at=time.time(),
            run_dir=str(self.settings.run_dir / sandbox_id),
            owner_pid=os.getpid(),
            owner_start=process_start(os.getpid()),
        )
        holder: list[SandboxState] = [state]
        process = None
        try:
            process = await asyncio.to_thread(self._start, holder, spec, layers, workdir)
            parts = SandboxParts(
                state=holder[0],
                process=process,
                entry=Entry(self._enter, str(self._seccomp), process.init_pid),
                env=env,
                workdir=workdir,
                user=spec.user or config.user,
                layer_ids=layer_ids,
                store=self.store,
                registry=self._snapshots.registry,
                snapshot_ttl_s=self.settings.snapshot_ttl_s,
                owner=(self.idmap.host(0), self.idmap.host(0)),
            )
            sandbox = LocalSandbox(spec, parts)
        except BaseException:
            popen = process.popen if process is not None else None
            await asyncio.to_thread(teardown, holder[0], popen)
            raise
        self._live[sandbox_id] = sandbox
        if target is not None:
            netns = f"/proc/{process.init_pid}/ns/net"
            try:
                sandbox.add_forwarder(await GatewayForwarder(netns, target).start())
            except BaseException:
                await sandbox.close()
                raise
        return sandbox

    def _start(
        self, holder: list[SandboxState], spec: SandboxSpec, layers: tuple[Path, ...], workdir: str
    ) -> BwrapProcess:
        """Mount, make cgroups, start bubblewrap (blocking); updates ``holder[0]``."""
        state = holder[0]
        dirs = state.dirs
        dirs.run_dir.mkdir(parents=True)
        state.save()
        mount_rootfs(dirs, layers, spec.disk_mb, self.idmap)
        owner = (self.idmap.host(0), self.idmap.host(0))
        root = SandboxFiles(str(dirs.merged), owner=owner)
        root.makedirs(workdir)
        bind_mounts(root, [m for m in spec.mounts if not under_dev(m)])
        cgroups = SandboxCgroups.create(state.id, spec)
        state = replace(
            state,
            cgroup_tracker=str(cgroups.tracker) if cgroups.tracker else None,
            cgroup_limits=[str(p) for p in cgroups.limits],
        ).save()
        holder[0] = state
        prefix = join_cgroups(cgroups.init_procs(), cgroups.ulimit_kb)
        argv = bwrap_argv(self._tools["bwrap"], dirs.merged, spec, state.id, workdir)
        log = dirs.run_dir / "bwrap.log"
        process = spawn(prefix, argv, Start(spec.lifetime_s, log, self.idmap, self._seccomp))
        holder[0] = state.started(process.popen.pid, process.init_pid).save()
        if spec.network != NetworkMode.HOST:
            setup_sysfs(self._enter, process.init_pid)
        return process

    def _resolve_image(
        self, image: str
    ) -> tuple[tuple[Path, ...], ImageConfig, tuple[str, ...] | None]:
        if image.startswith("/"):
            root = Path(image)
            if not root.is_dir():
                raise ImageError(f"root filesystem {image!r} is not a directory on this host")
            return (root,), ImageConfig(), None
        name = image
        try:
            found = find_or_pull(self.store, name, self.settings)
        except RegistryUnreachableError as exc:
            if name not in BASE_IMAGES:
                raise RegistryUnreachableError(
                    f"image {name!r} is not in the local image store {self.store.root}, and "
                    f"{exc}. Offline here: {offline_images()}; or import a root "
                    f"filesystem with `rllm-cli sandbox image import {name} ROOTFS.tar`"
                ) from exc
            log.warning("%s; building %s offline from Debian's packages instead", exc, name)
            found = None
        if found is None and name in BASE_IMAGES:
            found = ensure_base(self.store, name)
        if found is None:
            try:
                found = self.store.get(name)
            except ImageError as exc:
                raise ImageError(
                    f"{exc}. Offline here: {offline_images()}; or pull it "
                    f"(RLLM_SANDBOX_PULL_POLICY is {self.settings.pull_policy.value})"
                ) from exc
        return found.layers, found.config, tuple(p.name for p in found.layers)

    async def build_image(self, context_dir: Path, name: str | None = None) -> ImageInfo:
        """Build the Dockerfile in ``context_dir`` (``rllm.sandboxes.images.build``)."""
        from rllm.sandboxes.images import build  # the builder is optional: import when asked

        info: ImageInfo = await build.build_image(self, self.store, context_dir, name)
        return info

    async def images(self) -> list[ImageInfo]:
        """Images in the store."""
        images = await asyncio.to_thread(self.store.all)
        return [ImageInfo(i.name, self.name, i.id, None, i.created_at) for i in images]

    async def sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Every local sandbox with a state file (any process's), optionally by labels."""
        states = await asyncio.to_thread(read_states, self.settings.run_dir)
        return [
            SandboxInfo(s.id, self.name, s.image, s.labels, s.created_at, s.alive())
            for s in states
            if labels_match(s.labels, labels)
        ]

    async def reap(
        self, labels: Mapping[str, str] | None = None, older_than_s: float | None = None
    ) -> list[str]:
        """Close every sandbox matching ``labels`` (older than ``older_than_s``), ours or
        left by any process, dead or alive; returns their ids."""
        reaped = []
        for state in await asyncio.to_thread(read_states, self.settings.run_dir):
            age = time.time() - state.created_at
            if not labels_match(state.labels, labels):
                continue
            if older_than_s is not None and age < older_than_s:
                continue
            mine = self._live.get(state.id)
            if mine is not None:
                await mine.close()
            else:
                await asyncio.to_thread(teardown, state)
            reaped.append(state.id)
        return reaped

    async def aclose(self) -> None:
        """Close the sandboxes this backend created."""
        for sandbox in list(self._live.values()):
            await sandbox.close()
