"""The policy version steps are stamped with: what the upstream serves.

``rllm.kafka.PolicyFollower`` reads ``rllm.policy-updates`` in log order; ``PolicySync``
takes what the log names only once the upstream serves it. A local model server reports its
policy on ``/health`` (``policy_version``, ``policy_run``), and the gateway adopts what it
reports, so a checkpoint the server cannot load is never adopted; an upstream that reports
none (vLLM, SGLang, a hosted API) is taken to serve what the log names. Each run's version
adopted is acknowledged on ``rllm.policy-updates`` with a ``PolicyServed`` (a trainer's
"the update is live").
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

from .settings import UpstreamKind

if TYPE_CHECKING:
    from .state import GatewayState

__all__ = ["PolicySync", "upstream_policy"]

log = logging.getLogger("rllm.gateway")


_SILENT = (404, 405)
"""``/health`` statuses of an upstream that has no policy to report."""


async def upstream_policy(state: GatewayState) -> tuple[bool, PolicyPointer | None]:
    """``(answered, policy)``: the run and version the upstream reports on ``/health`` (the
    local model server does), None when it answered without one (vLLM, SGLang); not
    ``answered`` when it could not be asked (down, starting, an error status)."""
    if state.upstream.kind is UpstreamKind.HOSTED:
        return True, None
    try:
        resp = await state.upstream.client.get("/health", timeout=2.0)
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


class PolicySync:
    """Keeps ``state.policy`` on what the upstream serves.

    ``offer`` (on the event loop) takes a record read from the log into ``state.announced``
    (``rllm.schemas.lineage``'s rule); ``run`` then asks the upstream until it serves that
    policy, adopting whatever it reports meanwhile, every ``poll_s`` doubling to ``max_poll_s``.
    """

    def __init__(self, state: GatewayState, poll_s: float = 0.1, max_poll_s: float = 2.0) -> None:
        self.state = state
        self.poll_s, self.max_poll_s = poll_s, max_poll_s
        self._wake = asyncio.Event()
        self._wake.set()  # ask the upstream once at start

    def offer(self, record: PolicyUpdated) -> None:
        """Take a PolicyUpdated read from the log; the upstream is asked next."""
        self.state.announced = advance(self.state.announced, record)
        self._wake.set()

    def _adopt(self, pointer: PolicyPointer, reported: bool) -> None:
        """Stamp steps with ``pointer`` from now on (``reported``: the upstream said so)."""
        st = self.state
        if pointer != st.policy:
            if st.announced is not None and pointer != st.announced:
                log.info(
                    "policy: the upstream serves %s version %d, not %s version %d (yet)",
                    pointer.run_id or "(base weights)",
                    pointer.version,
                    st.announced.run_id,
                    st.announced.version,
                )
            st.policy, st.policy_version = pointer, pointer.version
            self._acknowledge(pointer, reported)

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

    async def _confirm(self) -> None:
        """Ask the upstream until it serves what the log names (or says nothing)."""
        delay = self.poll_s
        while True:
            answered, served = await upstream_policy(self.state)
            if answered and served is None:  # it does not say: it serves what the log names
                if self.state.announced is not None:
                    self._adopt(self.state.announced, reported=False)
                return
            if served is not None:
                self._adopt(served, reported=True)
                if self.state.announced in (None, served):
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)  # a newer record: ask now
            self._wake.clear()
            delay = min(delay * 2, self.max_poll_s)

    async def run(self) -> None:
        """Confirm every offered record with the upstream, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._confirm()
            except Exception:  # the sync must survive; it logs and waits for the next record
                log.exception("following the upstream's policy failed")
