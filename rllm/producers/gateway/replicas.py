"""Several upstream replicas of one model behind the gateway: which one serves a session.

A session sticks to the replica of its first call (the prompt it extends is in that
replica's prefix cache); a new session goes to the live replica with the fewest calls in
flight, then the fewest sessions. A replica that cannot be reached is taken out: each of
its sessions moves at its next call, and that call's step notes the move
(``sampling_params_json`` ``replica_moved``). A replica taken out is asked ``/health``
every ``replica_probe_s`` and routed to again once it answers and has confirmed a policy
again. Each replica keeps the
policy it confirmed (``policy.PolicyTracker`` syncs each one); a step is stamped with its
replica's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from rllm.producers.gateway.sync.local import health_policy
from rllm.producers.gateway.sync.types import PolicySync
from rllm.producers.gateway.upstreams import Upstream
from rllm.schemas.lineage import PolicyPointer

__all__ = ["Replica", "ReplicaSet"]

log = logging.getLogger("rllm.gateway")


@dataclass(eq=False)
class Replica:
    """One upstream server and what the gateway knows of it."""

    upstream: Upstream
    live: bool = True
    """Routed to (False: taken out after a failure, until its ``/health`` answers)."""
    down_reason: str | None = None
    """Why it was taken out."""
    in_flight: int = 0
    """Calls it is serving now."""
    sessions: int = 0
    """Open sessions that stick to it."""
    sync: PolicySync | None = None
    """How it is told to serve a policy (chosen once it can be asked)."""
    policy: PolicyPointer | None = None
    """The run and version it confirmed serving (None: not known yet)."""
    policy_version: int = 0
    """The version its steps are stamped with."""
    served_model: str | None = None
    """The ``model`` its calls name for the policy (a LoRA adapter it loaded), else None."""
    reported: bool = True
    """Whether it said which policy it serves itself (a read-back), not only acknowledged."""
    sync_error: tuple[PolicyPointer, str] | None = None
    """The policy it last refused to load, and why."""

    @property
    def url(self) -> str:
        """Its base URL (what steps record as ``upstream``)."""
        return self.upstream.url


@dataclass
class ReplicaSet:
    """The replicas and each open session's replica."""

    replicas: list[Replica]
    changed: list[Callable[[], None]] = field(default_factory=list)
    """Called when a replica is taken out or comes back (the policy every live replica
    serves may change)."""
    ready: Callable[[Replica], bool] = lambda replica: True
    """Whether a replica taken out whose ``/health`` answers may take calls again
    (``policy.PolicyTracker``: once it confirmed a policy again, as a server that comes back
    may have restarted on other weights)."""
    _pins: dict[str, Replica] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Replica]:
        return iter(self.replicas)

    def __len__(self) -> int:
        return len(self.replicas)

    @property
    def first(self) -> Replica:
        """The first replica (``upstream_url``)."""
        return self.replicas[0]

    @property
    def live(self) -> list[Replica]:
        """The replicas routed to."""
        return [r for r in self.replicas if r.live]

    def least_loaded(self) -> Replica:
        """The live replica with the fewest calls in flight, then sessions, then the first
        listed; the first replica when none is live (its call fails naming it)."""
        live = self.live
        if not live:
            return self.replicas[0]
        return min(live, key=lambda r: (r.in_flight, r.sessions))

    def route(self, session_id: str) -> tuple[Replica, str | None]:
        """The replica that serves ``session_id``'s next call, and the note its step
        carries when the session moved there from a replica taken out (else None)."""
        pinned = self._pins.get(session_id)
        if pinned is not None and (pinned.live or not self.live):
            return pinned, None  # (none live: it stays, and its call fails naming it)
        chosen = self.least_loaded()
        self._pins[session_id] = chosen
        chosen.sessions += 1
        if pinned is None:
            return chosen, None
        pinned.sessions -= 1
        note = (
            f"replica {pinned.url} was taken out ({pinned.down_reason}); the session moved "
            f"to {chosen.url}, whose prefix cache does not hold its earlier prompts"
        )
        log.warning("session %s: %s", session_id, note)
        return chosen, note

    def release(self, session_id: str) -> None:
        """The session closed: it no longer counts on its replica."""
        pinned = self._pins.pop(session_id, None)
        if pinned is not None:
            pinned.sessions -= 1

    def take_out(self, replica: Replica, reason: str) -> bool:
        """Route no session to ``replica`` until it answers ``/health`` again; whether it
        was live before (a lone replica is never taken out: there is nowhere to move)."""
        if not replica.live or len(self.replicas) == 1:
            return False
        replica.live, replica.down_reason = False, reason
        # what it served is not known any more: it is asked again before it comes back
        replica.policy, replica.served_model = None, None
        moving = sum(1 for r in self._pins.values() if r is replica)
        log.error(
            "upstream replica %s taken out (serving policy version %d): %s; its %d open "
            "sessions move to the other replicas at their next call (%d live)",
            replica.url,
            replica.policy_version,
            reason,
            moving,
            len(self.live),
        )
        self._changed()
        return True

    def bring_back(self, replica: Replica) -> None:
        """Route to ``replica`` again."""
        if replica.live:
            return
        replica.live, replica.down_reason = True, None
        log.info("upstream replica %s answers again; new sessions may go to it", replica.url)
        self._changed()

    def _changed(self) -> None:
        for callback in self.changed:
            callback()

    async def probe(self, interval_s: float) -> None:
        """Ask every replica taken out for ``/health`` each ``interval_s``; bring back
        those that answer. Runs until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            for replica in [r for r in self.replicas if not r.live]:
                answered, _ = await health_policy(replica.upstream.client)
                if answered and self.ready(replica):
                    self.bring_back(replica)
