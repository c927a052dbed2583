"""The assemble processor's state machine, over two key-value stores (faust tables in the
worker, plain dicts in unit tests): session headers (JSON) and the sessions' raw events.

Idempotence: an event whose ``event_id`` the session already accepted is dropped, so
re-reading the log after a crash changes nothing. A finished session keeps its header
(event ids only) for ``closed_retention_s``, so a late event is reported to the dead
letters, never merged into a trajectory that was already emitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rllm.processors.assemble_dicts import assemble_trajectory_dict
from rllm.processors.book import Book, Store
from rllm.processors.deadletter import report
from rllm.processors.errors import AssemblyError
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import Emit, Output, SessionHeader, SessionPhase
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import to_avro
from rllm.schemas.types import (
    RewardAssigned,
    SessionClosed,
    SessionEvent,
    SessionOpened,
    TrajectoryAssembled,
)

__all__ = ["SessionBook", "SessionStats"]

_OPENED, _REWARD, _CLOSED = (
    SessionOpened.avro_name,
    RewardAssigned.avro_name,
    SessionClosed.avro_name,
)


@dataclass
class SessionStats:
    """Counters of what the book did (for logs and tests)."""

    accepted: int = 0
    duplicates: int = 0
    late: int = 0
    trajectories: int = 0
    idle_timeouts: int = 0
    invalid: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


def _blob_key(session_id: str, event_id: str) -> bytes:
    return f"{session_id}\x00{event_id}".encode()


class SessionBook(Book[SessionHeader]):
    """Accepts session events and decides when a trajectory is complete (a "book": the
    processors' keyed state over a faust table, ``GroupBook`` is the other)."""

    header_type = SessionHeader

    def __init__(
        self,
        settings: ProcessorSettings,
        headers: Store,
        events: Store,
        codec: AvroCodec,
        source_topic: str,
    ) -> None:
        super().__init__(settings, headers, codec, source_topic)
        self.events = events
        self.stats = SessionStats()

    def next_due(self, h: SessionHeader) -> float:
        """Wall time at which a tick would change this session."""
        if h.phase == SessionPhase.OPEN:
            return h.last_event_at + self.settings.idle_timeout_s
        if h.phase == SessionPhase.AWAITING_REWARD:
            return h.reward_deadline or 0.0
        return (h.done_at or 0.0) + self.settings.closed_retention_s

    def key_of(self, h: SessionHeader) -> str:
        """The header's key."""
        return h.session_id

    def on_event(
        self, event: SessionEvent, raw: bytes, partition: int, offset: int, now: float
    ) -> list[Emit]:
        """Accept one decoded event (``raw`` is its value as it came)."""
        return self.on_event_dict(to_avro(event), raw, partition, offset, now)

    def on_event_dict(
        self, event: dict[str, Any], raw: bytes, partition: int, offset: int, now: float
    ) -> list[Emit]:
        """``on_event`` on the Avro-shaped SessionEvent dict (the fast path: no model)."""
        session_id, event_id = event["session_id"], event["event_id"]
        kind, payload = event["payload"]
        h = self.header(session_id) or SessionHeader(
            session_id=session_id, run_id=event["run_id"], partition=partition
        )
        blob = _blob_key(session_id, event_id)
        known = event_id in h.event_ids
        if known and (h.phase == SessionPhase.DONE or blob in self.events):
            self.stats.duplicates += 1
            return []
        # Known but without its blob: a crash fell between the headers' and the events'
        # changelog writes, and the event is redelivered; store it again.
        if not known:
            h.event_ids.append(event_id)
        if h.phase == SessionPhase.DONE:
            self.stats.late += 1
            self._save(h)
            kind = kind.rpartition(".")[2]
            return [
                report(
                    self.source_topic,
                    partition,
                    offset,
                    session_id.encode(),
                    raw,
                    f"late {kind} (event {event_id}) for session {session_id}: its "
                    f"trajectory was already emitted ({h.done_reason}); not merged",
                    "LateEvent",
                )
            ]
        self.stats.accepted += 1
        self.events[blob] = raw
        h.last_event_at = now
        if kind == _OPENED:
            h.has_reward_fn = bool(payload["task"]["reward_fn"])
        elif kind == _REWARD:
            h.has_reward = True
            if h.phase == SessionPhase.AWAITING_REWARD:
                return self._finish(h, "closed", now)
        elif kind == _CLOSED:
            if h.has_reward or h.has_reward_fn or self.settings.reward_wait_s == 0:
                return self._finish(h, "closed", now)
            h.phase = SessionPhase.AWAITING_REWARD
            h.reward_deadline = now + self.settings.reward_wait_s
        self._save(h)
        return []

    def due(self, h: SessionHeader, now: float) -> bool:
        """Whether a timer tick would change this session now."""
        return now >= self.next_due(h)

    def on_tick(self, session_id: str, now: float) -> list[Emit]:
        """Apply timeouts to one session: idle close, reward wait over, or forget it."""
        h = self.header(session_id)
        if h is None or not self.due(h, now):
            return []
        if h.phase == SessionPhase.OPEN:
            self.stats.idle_timeouts += 1
            return self._finish(h, "idle_timeout", now)
        if h.phase == SessionPhase.AWAITING_REWARD:
            return self._finish(h, "reward_wait_expired", now)
        del self.headers[session_id.encode()]
        self.index.drop(session_id)
        return []

    def _finish(self, h: SessionHeader, reason: str, now: float) -> list[Emit]:
        keys = [_blob_key(h.session_id, eid) for eid in h.event_ids]
        raws = [(k, self.events.get(k)) for k in keys]
        decoded = [self.codec.decode_dict(r)[1] for _, r in raws if r is not None]
        out: list[Emit] = []
        try:
            # steps delta-encoded, as on every later hop (rllm.schemas.delta)
            traj = assemble_trajectory_dict(decoded, idle_timeout=(reason == "idle_timeout"))
        except AssemblyError as exc:
            self.stats.invalid += 1
            reason = "invalid"
            out.append(self._session_report(h, str(exc), type(exc).__name__))
        else:
            if reason == "reward_wait_expired":
                traj["reward_error"] = (
                    f"no RewardAssigned within reward_wait_s={self.settings.reward_wait_s:g} s "
                    "of SessionClosed and the task names no reward_fn"
                )
            out.extend(self._trajectory_emits(traj, h))
        for key, raw in raws:
            if raw is not None:
                del self.events[key]
        h.phase = SessionPhase.DONE
        h.done_reason = reason
        h.done_at = now
        self._save(h)
        self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1
        return out

    def _trajectory_emits(self, traj: dict[str, Any], h: SessionHeader) -> list[Emit]:
        self.stats.trajectories += 1
        out = [
            Emit(
                Output.SCORING,
                traj["session_id"].encode(),
                value=self.codec.encode_dict(TrajectoryAssembled.avro_name, traj),
            )
        ]
        if "step_count_mismatch" in traj["flags"]:
            message = (
                f"session {h.session_id}: SessionClosed reported {traj['num_steps_reported']} "
                f"steps but {len(traj['steps'])} arrived; trajectory emitted with flag "
                "step_count_mismatch"
            )
            out.append(self._session_report(h, message, "StepCountMismatch"))
        return out

    def _session_report(self, h: SessionHeader, message: str, kind: str) -> Emit:
        """A dead letter about session ``h`` as a whole (no one source record: offset -1)."""
        return report(self.source_topic, h.partition, -1, h.session_id.encode(), b"", message, kind)
