"""Daytona's snapshots as the daytona backend's ``SnapshotStore``: taken with
``POST /sandbox/{id}/snapshot``, removed at Daytona, and recorded in the shared snapshot
registry (their TTLs and labels)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from daytona import DaytonaError

from rllm.sandboxes.daytona.client import not_found
from rllm.sandboxes.daytona.sandbox import DaytonaSandbox
from rllm.sandboxes.errors import SnapshotError
from rllm.sandboxes.hosted import HostedSnapshots

if TYPE_CHECKING:
    from rllm.sandboxes.daytona.backend import DaytonaBackend

__all__ = ["NAME", "DaytonaSnapshots"]

NAME = "daytona"
"""The backend's registry name."""


class DaytonaSnapshots(HostedSnapshots):
    """Daytona's snapshots, each recorded in the shared snapshot registry too."""

    backend_name = NAME
    sandbox_type = DaytonaSandbox
    backend: DaytonaBackend

    async def _take(self, sandbox: DaytonaSandbox, name: str) -> str:
        """Snapshot ``sandbox`` as ``name``, replacing one of that name."""
        client = await self.backend.client()
        try:
            await client.snapshot.delete(name)
        except DaytonaError as exc:
            if not not_found(exc):
                raise SnapshotError(f"replacing daytona snapshot {name!r}: {exc}") from exc
        await sandbox.take_snapshot(name)
        return name

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
