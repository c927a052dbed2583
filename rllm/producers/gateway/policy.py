"""The policy version steps are stamped with: what the upstream confirmed it serves.

``rllm.kafka.PolicyFollower`` reads ``rllm.policy-updates`` in log order; ``PolicyTracker``
has the upstream serve what the log names through its ``PolicySync`` (``sync/``), and takes
it only once the upstream confirms. Our model server loads each checkpoint itself and
reports its policy on ``/health``: the gateway adopts what it reports. vLLM and SGLang are
told to load the checkpoint; the gateway waits for their answer and reads back what they
serve where they can say. A load refused or failed keeps the version served before, is
logged, and is shown on ``/admin/policy`` (``sync_error``), where a trainer's wait sees it.
Each run's version adopted is acknowledged on ``rllm.policy-updates`` with a
``PolicyServed`` (a trainer's "the update is live").

With several replicas (``replicas``) each is synced on its own and its steps carry the
version it confirmed; the gateway's version (``/admin/policy``, ``PolicyServed``) is the one
every live replica confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import httpx

from rllm.producers.gateway.sync import (
    PolicyLoadRefused,
    PolicySync,
    Served,
    SyncKind,
    checkpoint_of,
    detect_kind,
    make_sync,
)
from rllm.schemas.lineage import PolicyPointer, advance
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES

if TYPE_CHECKING:
    from rllm.producers.gateway.replicas import Replica
    from rllm.producers.gateway.state import GatewayState

__all__ = ["PolicyTracker", "upstream_policy"]

log = logging.getLogger("rllm.gateway")


async def upstream_policy(state: GatewayState) -> tuple[bool, PolicyPointer | None]:
    """``(answered, policy)``: the run and version the first live replica reports serving
    (None when it answered without one, or its sync is not chosen yet); not ``answered``
    when it could not be asked."""
    replica = (state.replicas.live or [state.replicas.first])[0]
    if replica.sync is None:
        return True, None
    answered, served = await replica.sync.serving()
    return answered, None if served is None else served.pointer


class PolicyTracker:
    """Keeps each replica's policy on what it serves, and ``state.policy`` on what every
    live replica serves.

    ``offer`` (on the event loop) takes a record read from the log into ``state.announced``
    (``rllm.schemas.lineage``'s rule); ``run`` then has every replica serve it and adopts it
    for each once that replica confirms. A server that loads on its own (``local``) is asked
    until it serves that policy, adopting whatever it reports meanwhile, every ``poll_s``
    doubling to ``max_poll_s``; an unreachable one is tried again at the same pace.
    """

    def __init__(self, state: GatewayState, poll_s: float = 0.1, max_poll_s: float = 2.0) -> None:
        self.state = state
        self.poll_s, self.max_poll_s = poll_s, max_poll_s
        self._record: PolicyUpdated | None = None
        """The record ``state.announced`` comes from."""
        self._wakes = {id(replica): asyncio.Event() for replica in state.replicas}
        self._wake_all()  # ask every replica once at start
        state.replicas.changed.append(self._replicas_changed)
        state.replicas.ready = self._confirmed

    def _confirmed(self, replica: Replica) -> bool:
        """Whether ``replica`` may come back: it confirmed a policy since it was taken out
        (or none was published)."""
        return self.state.announced is None or replica.policy is not None

    def _wake_all(self) -> None:
        for wake in self._wakes.values():
            wake.set()

    def _replicas_changed(self) -> None:
        """A replica was taken out or came back: the policy every live one serves may
        have changed, and one that came back is asked again."""
        self._agree()
        self._wake_all()

    def offer(self, record: PolicyUpdated) -> None:
        """Take a PolicyUpdated read from the log; the replicas are asked next."""
        st = self.state
        announced = advance(st.announced, record)
        if announced != st.announced or self._record is None:
            self._record = record
            for replica in st.replicas:  # superseded: the newer one is tried
                if replica.sync_error is not None and replica.sync_error[0] != announced:
                    replica.sync_error = None
            if st.sync_error is not None and st.sync_error[0] != announced:
                st.sync_error = None
        st.announced = announced
        self._wake_all()

    def _adopt(self, replica: Replica, served: Served) -> None:
        """Stamp ``replica``'s steps with ``served`` from now on."""
        st = self.state
        pointer = served.pointer
        if pointer == replica.policy and served.model == replica.served_model:
            return
        if st.announced is not None and pointer != st.announced:
            log.info(
                "policy: upstream %s serves %s version %d, not %s version %d (yet)",
                replica.url,
                pointer.run_id or "(base weights)",
                pointer.version,
                st.announced.run_id,
                st.announced.version,
            )
        # one assignment each, no await between: a call sees both or neither
        replica.policy, replica.policy_version = pointer, pointer.version
        replica.served_model, replica.reported = served.model, served.reported
        if replica.sync_error is not None and replica.sync_error[0] == pointer:
            replica.sync_error = None
        self._agree()

    def _agree(self) -> None:
        """Take as the gateway's policy the one every live replica confirmed (kept while
        they differ), and acknowledge it."""
        st = self.state
        live = st.replicas.live
        if not live or len({replica.policy for replica in live}) != 1:
            return
        pointer, model = live[0].policy, live[0].served_model
        if pointer is None or (pointer == st.policy and model == st.served_model):
            return
        if len(st.replicas) > 1:
            log.info(
                "policy %s version %d is served by every live replica (%s)",
                pointer.run_id or "(base weights)",
                pointer.version,
                ", ".join(replica.url for replica in live),
            )
        st.policy, st.policy_version, st.served_model = pointer, pointer.version, model
        if st.sync_error is not None and st.sync_error[0] == pointer:
            st.sync_error = None
        self._acknowledge(pointer, all(replica.reported for replica in live))

    def _refuse(self, replica: Replica, pointer: PolicyPointer, reason: str) -> None:
        """Keep the version ``replica`` served; say why ``pointer`` is not."""
        st = self.state
        if len(st.replicas) > 1:
            reason = f"upstream {replica.url}: {reason}"
        replica.sync_error = st.sync_error = (pointer, reason)
        log.error(
            "policy %s version %d is not served by upstream %s; its steps keep version %d: %s",
            pointer.run_id,
            pointer.version,
            replica.url,
            replica.policy_version,
            reason,
        )

    def _acknowledge(self, pointer: PolicyPointer, reported: bool) -> None:
        """Publish ``PolicyServed`` for a run's version adopted (not for an upstream's own
        weights, nor from a gateway that does not follow the log). Kafka away: the sink
        spools it, as it does session events."""
        st = self.state
        if not pointer.run_id or not st.settings.follow_policy_updates:
            return
        record = PolicyServed(
            event_id=f"{st.gateway_id}/{pointer.run_id}/v{pointer.version}",
            gateway_id=st.gateway_id,
            run_id=pointer.run_id,
            version=pointer.version,
            upstream_reports=reported,
        )
        try:
            st.sink.submit(POLICY_UPDATES, pointer.run_id, record)
        except Exception:  # the gateway serves on; a trainer falls back to asking it
            log.exception(
                "acknowledging policy %s version %d failed", pointer.run_id, pointer.version
            )

    async def _pause(self, replica: Replica, delay: float) -> float:
        """Wait ``delay`` or until a newer record; the next delay."""
        wake = self._wakes[id(replica)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), delay)
        wake.clear()
        return min(delay * 2, self.max_poll_s)

    async def _sync(self, replica: Replica) -> PolicySync | None:
        """The replica's sync, chosen once it can be asked."""
        st = self.state
        if replica.sync is None:
            kind = await detect_kind(st.settings, replica.upstream.client)
            if kind is not None:
                timeout = st.settings.upstream_timeout_s
                replica.sync = make_sync(kind, replica.upstream.client, timeout)
                log.info("policy sync: %s (upstream %s)", kind.value, replica.url)
        return replica.sync

    async def _confirm(self, replica: Replica) -> None:
        """Until ``replica`` serves what the log names, refuses it, or (not told to load
        it) says nothing of its own."""
        delay = self.poll_s
        while (sync := await self._sync(replica)) is None:
            delay = await self._pause(replica, delay)
        while True:
            st, record, target = self.state, self._record, self.state.announced
            pending = target is not None and target != replica.policy and record is not None
            if pending and target == (replica.sync_error[0] if replica.sync_error else None):
                return  # refused: kept until a newer record
            if pending and record is not None and sync.kind is not SyncKind.LOCAL:
                assert target is not None
                try:
                    served = await sync.load(checkpoint_of(record, st.settings))
                except PolicyLoadRefused as exc:
                    self._refuse(replica, target, str(exc))
                    return
                except httpx.HTTPError as exc:
                    log.warning(
                        "policy: upstream %s could not be asked to load %s version %d: %s",
                        replica.url,
                        target.run_id,
                        target.version,
                        exc,
                    )
                    delay = await self._pause(replica, delay)
                    continue
                if served is not None:
                    self._adopt(replica, served)
                    if self.state.announced == served.pointer:
                        return
                    continue  # a newer record came while it loaded
            answered, served = await sync.serving()
            if answered and served is None:  # it does not say: it serves what the log names
                if target is not None and sync.kind is SyncKind.LOCAL:
                    self._adopt(replica, Served(target, reported=False))
                return
            if served is not None:
                self._adopt(replica, served)
                if self.state.announced in (None, served.pointer):
                    return
            delay = await self._pause(replica, delay)

    async def _follow(self, replica: Replica) -> None:
        wake = self._wakes[id(replica)]
        while True:
            await wake.wait()
            wake.clear()
            try:
                await self._confirm(replica)
            except Exception:  # the sync must survive; it logs and waits for the next record
                log.exception("following upstream %s's policy failed", replica.url)

    async def run(self) -> None:
        """Confirm every offered record with every replica, until cancelled."""
        await asyncio.gather(*(self._follow(replica) for replica in self.state.replicas))
