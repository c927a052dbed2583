"""The snapshot registry: every backend's snapshots in one JSON file under
``$RLLM_HOME/sandboxes``, with their content keys and TTLs.

A snapshot is keyed by the content hash of what made it (backend, base image, build steps,
install script: ``snapshot_key``), so ``ensure_snapshot`` reuses a prepared sandbox
(a task's environment plus a harness's install) instead of preparing it again.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from rllm.sandboxes.errors import SnapshotError
from rllm.sandboxes.types import Sandbox, SandboxBackend, SandboxSpec, SnapshotInfo

__all__ = ["RegistrySnapshots", "SnapshotRegistry", "ensure_snapshot", "snapshot_key"]


def snapshot_key(backend: str, base_image: str, *parts: str) -> str:
    """Content hash of a snapshot's recipe: the backend, its base image and each build
    step or install script, in order."""
    digest = hashlib.sha256()
    for part in (backend, base_image, *parts):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part.encode())
    return digest.hexdigest()[:24]


class SnapshotRegistry:
    """Snapshots by name, in a JSON file locked for each change (several processes)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, object]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                entries = json.loads(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                entries = {}
            except ValueError as exc:
                raise SnapshotError(f"snapshot registry {self.path} is not JSON: {exc}") from exc
            before = json.dumps(entries, sort_keys=True)
            yield entries
            if json.dumps(entries, sort_keys=True) != before:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
                os.replace(tmp, self.path)

    def register(self, info: SnapshotInfo) -> SnapshotInfo:
        """Record ``info``, replacing a snapshot of the same name."""
        with self._locked() as entries:
            record = asdict(info)
            record["labels"] = dict(info.labels)
            entries[info.name] = record
        return info

    def get(self, name: str) -> SnapshotInfo:
        """The snapshot called ``name``; ``SnapshotError`` naming it when there is none."""
        for info in self.all():
            if info.name == name:
                return info
        raise SnapshotError(f"no snapshot named {name!r} in {self.path}")

    def find_key(self, backend: str, key: str) -> SnapshotInfo | None:
        """The newest unexpired snapshot of ``backend`` made for ``key``, or None."""
        found = [i for i in self.all(backend) if i.key == key and not i.expired]
        return max(found, key=lambda i: i.created_at) if found else None

    def all(self, backend: str | None = None) -> list[SnapshotInfo]:
        """Snapshots, oldest first, optionally of one backend."""
        with self._locked() as entries:
            infos = [SnapshotInfo(**record) for record in entries.values()]  # type: ignore[arg-type]  # the records are asdict(SnapshotInfo) read back from JSON
        return sorted(
            (i for i in infos if backend is None or i.backend == backend),
            key=lambda i: i.created_at,
        )

    def remove(self, name: str) -> SnapshotInfo:
        """Forget a snapshot; returns what it was. ``SnapshotError`` when unknown."""
        with self._locked() as entries:
            record = entries.pop(name, None)
        if record is None:
            raise SnapshotError(f"no snapshot named {name!r} in {self.path}")
        return SnapshotInfo(**record)  # type: ignore[arg-type]  # the record is asdict(SnapshotInfo) read back from JSON

    def expired(self) -> list[SnapshotInfo]:
        """Snapshots past their TTL."""
        return [i for i in self.all() if i.expired]


class RegistrySnapshots:
    """What every backend's ``SnapshotStore`` shares: its snapshots are entries of the
    snapshot registry, and it snapshots only its own kind of sandbox."""

    backend_name: str
    """The backend's registry name (``SnapshotInfo.backend``)."""
    sandbox_type: type
    """The backend's sandbox class."""

    def __init__(self, registry: SnapshotRegistry) -> None:
        self.registry = registry
        """The snapshot registry (``ensure_snapshot`` records content keys in it)."""

    def _check_kind(self, sandbox: Sandbox) -> None:
        if not isinstance(sandbox, self.sandbox_type):
            raise SnapshotError(
                f"the {self.backend_name} backend cannot snapshot a {type(sandbox).__name__}; "
                "snapshot it in its own backend"
            )

    async def create(self, sandbox: Sandbox, name: str) -> SnapshotInfo:
        """Freeze one of the backend's sandboxes as ``name`` (the sandbox snapshots itself:
        a local one into the image store, a docker one by commit), replacing one of that
        name."""
        self._check_kind(sandbox)
        return await sandbox.snapshot(name)

    async def all(self) -> list[SnapshotInfo]:
        """The backend's snapshots, oldest first."""
        return await asyncio.to_thread(self.registry.all, self.backend_name)


async def ensure_snapshot(
    backend: SandboxBackend,
    spec: SandboxSpec,
    key: str,
    setup: Callable[[Sandbox], Awaitable[None]],
    name: str | None = None,
) -> SnapshotInfo:
    """The backend's snapshot for ``key``; made when missing or expired by creating a
    sandbox from ``spec``, awaiting ``setup`` in it and snapshotting it.

    Args:
        backend: where the snapshot lives.
        spec: the sandbox to prepare (its image, and the network the setup needs).
        key: ``snapshot_key(...)`` of the recipe.
        setup: prepares the sandbox; raising leaves no snapshot.
        name: the snapshot's name (default ``snap-<key>``).
    """
    existing = [i for i in await backend.snapshots.all() if i.key == key and not i.expired]
    if existing:
        return max(existing, key=lambda i: i.created_at)
    sandbox = await backend.create(spec)
    try:
        await setup(sandbox)
        info = await sandbox.snapshot(name or f"snap-{key}")
    finally:
        await sandbox.close()
    if info.key != key:
        info = _with_key(info, key)
        await _register(backend, info)
    return info


def _with_key(info: SnapshotInfo, key: str) -> SnapshotInfo:
    return SnapshotInfo(
        name=info.name,
        backend=info.backend,
        image=info.image,
        key=key,
        created_at=info.created_at,
        ttl_s=info.ttl_s,
        labels=dict(info.labels),
    )


async def _register(backend: SandboxBackend, info: SnapshotInfo) -> None:
    registry = getattr(backend.snapshots, "registry", None)
    if isinstance(registry, SnapshotRegistry):
        registry.register(info)
