"""Daytona's snapshots as the daytona backend's ``SnapshotStore``: taken with
``POST /sandbox/{id}/snapshot``, removed at Daytona, and recorded in the shared snapshot
registry (their TTLs and labels)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from daytona import DaytonaError

from rllm.sandboxes.daytona.client import not_found
from rllm.sandboxes.daytona.sandbox import DaytonaSandbox
from rllm.sandboxes.errors import SnapshotError
from rllm.sandboxes.snapshots import SnapshotRegistry
from rllm.sandboxes.types import Sandbox, SnapshotInfo

if TYPE_CHECKING:
    from rllm.sandboxes.daytona.backend import DaytonaBackend

__all__ = ["NAME", "DaytonaSnapshots"]

NAME = "daytona"
"""The backend's registry name."""


class DaytonaSnapshots:
    """Daytona's snapshots, each recorded in the shared snapshot registry too."""

    def __init__(self, backend: DaytonaBackend, registry: SnapshotRegistry) -> None:
        self.backend = backend
        self.registry = registry

    async def create(self, sandbox: Sandbox, name: str) -> SnapshotInfo:
        """Snapshot a daytona ``sandbox`` as ``name``, replacing one of that name."""
        if not isinstance(sandbox, DaytonaSandbox):
            raise SnapshotError(f"{sandbox!r} is not a daytona sandbox; snapshot it in its backend")
        client = await self.backend.client()
        try:
            await client.snapshot.delete(name)
        except DaytonaError as exc:
            if not not_found(exc):
                raise SnapshotError(f"replacing daytona snapshot {name!r}: {exc}") from exc
        await sandbox.take_snapshot(name)
        info = SnapshotInfo(
            name=name,
            backend=NAME,
            image=name,
            ttl_s=self.backend.settings.snapshot_ttl_s,
            labels=dict(sandbox.spec.labels),
        )
        return self.registry.register(info)

    async def all(self) -> list[SnapshotInfo]:
        """The registry's daytona snapshots."""
        return self.registry.all(NAME)

    async def delete(self, name: str) -> None:
        """Remove snapshot ``name`` at Daytona and from the registry.

        Raises:
            SnapshotError: neither knows it.
        """
        client = await self.backend.client()
        known = any(i.name == name for i in self.registry.all(NAME))
        try:
            await client.snapshot.delete(name)
        except DaytonaError as exc:
            if not not_found(exc):
                raise SnapshotError(f"deleting daytona snapshot {name!r}: {exc}") from exc
            if not known:
                raise SnapshotError(f"no daytona snapshot named {name!r}") from exc
        if known:
            self.registry.remove(name)
