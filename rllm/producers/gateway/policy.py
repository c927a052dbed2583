"""The policy version steps are stamped with: what the upstream serves.

``PolicyFollower`` reads ``rllm.policy-updates`` in log order; ``PolicySync`` takes what the
log names only once the upstream serves it. A local model server reports its policy on
``/health`` (``policy_version``, ``policy_run``), and the gateway adopts what it reports, so
a checkpoint the server cannot load is never adopted; an upstream that reports none (vLLM,
SGLang, a hosted API) is taken to serve what the log names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
from confluent_kafka import KafkaError as _KE

from rllm.kafka import make_codec, make_consumer
from rllm.schemas.lineage import PolicyPointer, advance
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import PolicyUpdated
from rllm.settings import KafkaSettings

from .settings import UpstreamKind

if TYPE_CHECKING:
    from .state import GatewayState

__all__ = ["PolicyFollower", "PolicySync", "upstream_policy"]

log = logging.getLogger("rllm.gateway")


class PolicyFollower:
    """A daemon thread reading policy updates from the beginning; calls ``on_update``."""

    def __init__(self, kafka: KafkaSettings, on_update: Callable[[PolicyUpdated], None]) -> None:
        self._kafka = kafka
        self._on_update = on_update
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rllm-policy-follower", daemon=True)

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def _run(self) -> None:
        codec = make_codec(self._kafka)
        consumer = make_consumer(
            self._kafka,
            f"rllm-gateway-{uuid.uuid4().hex[:12]}",
            **{"topic.metadata.refresh.interval.ms": 2000},
        )
        consumer.subscribe([self._kafka.topic(POLICY_UPDATES)])
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() not in (_KE.UNKNOWN_TOPIC_OR_PART, _KE._PARTITION_EOF):
                        log.warning("policy updates: %s", err.str())
                    continue
                try:
                    update = codec.decode(msg.value() or b"")
                except Exception as exc:  # a bad record must not stop the follower
                    log.warning(
                        "policy updates: undecodable record at offset %s: %s", msg.offset(), exc
                    )
                    continue
                if isinstance(update, PolicyUpdated):
                    self._on_update(update)
        finally:
            consumer.close()

    def stop(self) -> None:
        """Stop and join the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


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

    def _adopt(self, pointer: PolicyPointer) -> None:
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

    async def _confirm(self) -> None:
        """Ask the upstream until it serves what the log names (or says nothing)."""
        delay = self.poll_s
        while True:
            answered, served = await upstream_policy(self.state)
            if answered and served is None:  # it does not say: it serves what the log names
                if self.state.announced is not None:
                    self._adopt(self.state.announced)
                return
            if served is not None:
                self._adopt(served)
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
