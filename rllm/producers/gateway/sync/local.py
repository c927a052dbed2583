"""``LocalSync``: our model server loads each checkpoint itself (it follows
``rllm.policy-updates``) and reports the policy it serves on ``/health``."""

from __future__ import annotations

import httpx

from rllm.producers.gateway.sync.types import Checkpoint, Served, SyncKind
from rllm.schemas.lineage import PolicyPointer

__all__ = ["LocalSync", "LogSync", "health_policy"]

_SILENT = (404, 405)
"""``/health`` statuses of a server that has no policy to report."""


async def health_policy(client: httpx.AsyncClient) -> tuple[bool, PolicyPointer | None]:
    """``(answered, policy)``: the run and version a server reports on ``/health``
    (``policy_version``, ``policy_run``); None when it answered without one; not
    ``answered`` when it could not be asked (down, starting, an error status)."""
    try:
        resp = await client.get("/health", timeout=2.0)
        if resp.status_code in _SILENT:
            return True, None
        if resp.status_code != 200:
            return False, None
        info = resp.json() if resp.content else {}
        version, run = info.get("policy_version"), info.get("policy_run")
    except (httpx.HTTPError, ValueError, AttributeError):
        return False, None
    if not isinstance(version, int) or isinstance(version, bool):
        return True, None
    return True, PolicyPointer(run if isinstance(run, str) else "", version)


class LocalSync:
    """Our model server: nothing to send; ``serving`` reads ``/health``."""

    kind = SyncKind.LOCAL

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def load(self, checkpoint: Checkpoint) -> Served | None:
        """Nothing to tell: the server reads the same log; ask ``serving``."""
        return None

    async def serving(self) -> tuple[bool, Served | None]:
        answered, policy = await health_policy(self.client)
        return answered, None if policy is None else Served(policy)


class LogSync:
    """No server to tell (a hosted API): what the log names is taken as served."""

    kind = SyncKind.LOG

    async def load(self, checkpoint: Checkpoint) -> Served | None:
        return Served(checkpoint.pointer, reported=False)

    async def serving(self) -> tuple[bool, Served | None]:
        return True, None
