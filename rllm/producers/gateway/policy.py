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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import httpx

from rllm.schemas.lineage import PolicyPointer, advance
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import PolicyServed, PolicyUpdated

from .sync import (
    PolicyLoadRefused,
    PolicySync,
    Served,
    SyncKind,
    checkpoint_of,
    detect_kind,
    make_sync,
)

if TYPE_CHECKING:
    from .state import GatewayState

__all__ = ["PolicyTracker", "upstream_policy"]

log = logging.getLogger("rllm.gateway")


async def upstream_policy(state: GatewayState) -> tuple[bool, PolicyPointer | None]:
    """``(answered, policy)``: the run and version the upstream reports serving (None when
    it answered without one, or its sync is not chosen yet); not ``answered`` when it could
    not be asked."""
    if state.sync is None:
        return True, None
    answered, served = await state.sync.serving()
    return answered, None if served is None else served.pointer


class PolicyTracker:
    """Keeps ``state.policy`` on what the upstream serves.

    ``offer`` (on the event loop) takes a record read from the log into ``state.announced``
    (``rllm.schemas.lineage``'s rule); ``run`` then has the upstream serve it and adopts it
    once confirmed. A server that loads on its own (``local``) is asked until it serves that
    policy, adopting whatever it reports meanwhile, every ``poll_s`` doubling to
    ``max_poll_s``; an unreachable one is tried again at the same pace.
    """

    def __init__(self, state: GatewayState, poll_s: float = 0.1, max_poll_s: float = 2.0) -> None:
        self.state = state
        self.poll_s, self.max_poll_s = poll_s, max_poll_s
        self._record: PolicyUpdated | None = None
        """The record ``state.announced`` comes from."""
        self._wake = asyncio.Event()
        self._wake.set()  # ask the upstream once at start

    def offer(self, record: PolicyUpdated) -> None:
        """Take a PolicyUpdated read from the log; the upstream is asked next."""
        announced = advance(self.state.announced, record)
        if announced != self.state.announced or self._record is None:
            self._record = record
            if self.state.sync_error is not None and self.state.sync_error[0] != announced:
                self.state.sync_error = None  # superseded: the newer one is tried
        self.state.announced = announced
        self._wake.set()

    def _adopt(self, served: Served) -> None:
        """Stamp steps with ``served`` from now on."""
        st = self.state
        pointer = served.pointer
        if pointer == st.policy and served.model == st.served_model:
            return
        if st.announced is not None and pointer != st.announced:
            log.info(
                "policy: the upstream serves %s version %d, not %s version %d (yet)",
                pointer.run_id or "(base weights)",
                pointer.version,
                st.announced.run_id,
                st.announced.version,
            )
        # one assignment each, no await between: a call sees both or neither
        st.policy, st.policy_version, st.served_model = pointer, pointer.version, served.model
        if st.sync_error is not None and st.sync_error[0] == pointer:
            st.sync_error = None
        self._acknowledge(pointer, served.reported)

    def _refuse(self, pointer: PolicyPointer, reason: str) -> None:
        """Keep the version served; say why ``pointer`` is not."""
        st = self.state
        st.sync_error = (pointer, reason)
        log.error(
            "policy %s version %d is not served; steps keep version %d: %s",
            pointer.run_id,
            pointer.version,
            st.policy_version,
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

    async def _pause(self, delay: float) -> float:
        """Wait ``delay`` or until a newer record; the next delay."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)
        self._wake.clear()
        return min(delay * 2, self.max_poll_s)

    async def _sync(self) -> PolicySync | None:
        """The upstream's sync, chosen once it can be asked."""
        st = self.state
        if st.sync is None:
            kind = await detect_kind(st.settings, st.upstream.client)
            if kind is not None:
                st.sync = make_sync(kind, st.upstream.client, st.settings.upstream_timeout_s)
                log.info("policy sync: %s (upstream %s)", kind.value, st.upstream.url)
        return st.sync

    async def _confirm(self) -> None:
        """Until the upstream serves what the log names, refuses it, or (not told to load
        it) says nothing of its own."""
        delay = self.poll_s
        while (sync := await self._sync()) is None:
            delay = await self._pause(delay)
        while True:
            st, record, target = self.state, self._record, self.state.announced
            pending = target is not None and target != st.policy and record is not None
            if pending and target == (st.sync_error[0] if st.sync_error else None):
                return  # refused: kept until a newer record
            if pending and record is not None and sync.kind is not SyncKind.LOCAL:
                try:
                    served = await sync.load(checkpoint_of(record, st.settings))
                except PolicyLoadRefused as exc:
                    assert target is not None
                    self._refuse(target, str(exc))
                    return
                except httpx.HTTPError as exc:
                    log.warning("policy: the upstream could not be asked to load: %s", exc)
                    delay = await self._pause(delay)
                    continue
                if served is not None:
                    self._adopt(served)
                    if self.state.announced == served.pointer:
                        return
                    continue  # a newer record came while it loaded
            answered, served = await sync.serving()
            if answered and served is None:  # it does not say: it serves what the log names
                if target is not None and sync.kind is SyncKind.LOCAL:
                    self._adopt(Served(target, reported=False))
                return
            if served is not None:
                self._adopt(served)
                if self.state.announced in (None, served.pointer):
                    return
            delay = await self._pause(delay)

    async def run(self) -> None:
        """Confirm every offered record with the upstream, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._confirm()
            except Exception:  # the sync must survive; it logs and waits for the next record
                log.exception("following the upstream's policy failed")
