"""The gateway's shared state: settings, sessions, upstream, event sink, metrics, policy."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rllm.producers.gateway.metrics import Metrics
from rllm.producers.gateway.replicas import Replica, ReplicaSet
from rllm.producers.gateway.sessions import Session, SessionRegistry
from rllm.producers.gateway.settings import CaptureMode, GatewaySettings
from rllm.producers.gateway.sink import EventSink
from rllm.producers.gateway.sync.types import PolicySync
from rllm.producers.gateway.upstreams import Upstream
from rllm.schemas.envelope import envelope
from rllm.schemas.lineage import PolicyPointer
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionClosed, SessionEvent, SessionOpened, SessionStatus, Task

__all__ = ["GatewayState"]

log = logging.getLogger("rllm.gateway")


@dataclass
class GatewayState:
    """Everything a request handler needs."""

    settings: GatewaySettings
    upstream: Upstream
    sink: EventSink
    metrics: Metrics
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
    policy_version: int = 0
    """The version steps and sessions are stamped with: what the upstream serves."""
    policy: PolicyPointer | None = None
    """The run and version the upstream serves (None: not known; run "": its own weights)."""
    announced: PolicyPointer | None = None
    """The run and version ``rllm.policy-updates`` points at (None: none published yet);
    adopted once the upstream serves it (``policy.PolicyTracker``)."""
    served_model: str | None = None
    """The ``model`` calls are sent with while the policy is a LoRA adapter the gateway had
    the upstream load (None: the one the agent names); each replica's calls name its own
    (``Replica.served_model``), recorded in each step."""
    sync_error: tuple[PolicyPointer, str] | None = None
    """The policy a replica last refused to load, and its reason naming the replica
    (cleared by the next policy served)."""
    replicas: ReplicaSet = None  # type: ignore[assignment]  # None: built in __post_init__
    """Every upstream replica (``upstream`` alone by default); ``policy`` / ``policy_version``
    above are what every live one confirmed serving."""
    paused: bool = False
    gateway_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """This gateway process, as its ``PolicyServed`` records and ``/admin/policy`` name it."""
    _deferred: deque[Callable[[], object]] = field(default_factory=deque, repr=False)
    _settling: asyncio.Handle | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.replicas is None:
            self.replicas = ReplicaSet([Replica(self.upstream)])
        for replica in self.replicas:
            replica.policy_version = self.policy_version

    @property
    def sync(self) -> PolicySync | None:
        """The first replica's policy sync (``policy.PolicyTracker`` picks it at start)."""
        return self.replicas.first.sync

    def defer(self, submit: Callable[[], object]) -> None:
        """Run ``submit`` (an async-capture step's building and produce)
        ``publish_delay_ms`` from now, after every submit deferred before it."""
        self._deferred.append(submit)
        if self._settling is None:
            loop = asyncio.get_running_loop()
            delay = self.settings.publish_delay_ms / 1000
            self._settling = (
                loop.call_later(delay, self.settle) if delay else loop.call_soon(self.settle)
            )

    def settle(self) -> None:
        """Run the deferred submits now, in order: before anything that reads a session's
        steps or publishes after them (its close, its info, a step that waits for the ack,
        events posted for it, the shutdown)."""
        if self._settling is not None:
            self._settling.cancel()
            self._settling = None
        while self._deferred:
            submit = self._deferred.popleft()
            try:
                submit()
            except Exception:  # one failed step must not keep the later ones back
                log.exception("publishing a step failed")

    @property
    def wait_for_ack(self) -> bool:
        """Whether answers wait for Kafka's ack."""
        return self.settings.capture is CaptureMode.ACK

    async def publish(
        self, session: Session, event: SessionEvent, wait: bool | None = None
    ) -> None:
        """Publish a session event keyed by its session id."""
        await self.sink.emit(
            SESSION_EVENTS, session.session_id, event, self.wait_for_ack if wait is None else wait
        )

    async def open_session(
        self, session_id: str, run_id: str, task: Task, opened: SessionOpened | None = None
    ) -> Session:
        """Register a session and publish its SessionOpened (always waiting for the ack)."""
        opened = opened or SessionOpened(task=task, policy_version=self.policy_version)
        session = self.sessions.open(session_id, run_id, task, model=opened.model)
        event = envelope(session_id, run_id, self.settings.producer_name, opened)
        session.in_flight += 1  # not idle while its SessionOpened waits for the broker
        try:
            await self.publish(session, event, wait=True)
        except BaseException:
            self.sessions.close(session_id)
            self.replicas.release(session_id)
            raise
        finally:
            session.in_flight -= 1
            session.last_seen = time.monotonic()
        return session

    async def reap_idle(self) -> int:
        """Close sessions idle past the timeout with status timeout; return how many."""
        timeout = self.settings.idle_timeout_s
        idle = self.sessions.idle(timeout) if timeout else []
        for session in idle:
            await self.close_session(
                session, SessionStatus.TIMEOUT, error=f"no call for {timeout:g} s (idle timeout)"
            )
        return len(idle)

    async def close_session(
        self,
        session: Session,
        status: SessionStatus,
        output: object = None,
        error: str | None = None,
    ) -> SessionClosed:
        """Publish SessionClosed (after every step of the session) and forget the session."""
        self.settle()
        closed = SessionClosed(
            status=status,
            output_json=None if output is None else json.dumps(output),
            error=error,
            num_steps=session.num_steps,
        )
        self.sessions.close(session.session_id)
        self.replicas.release(session.session_id)
        event = envelope(session.session_id, session.run_id, self.settings.producer_name, closed)
        await self.publish(session, event, wait=True)
        return closed
