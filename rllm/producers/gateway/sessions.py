"""Open sessions: ids, per-session keys, step counters and the prefix for delta encoding.

Pure state, no I/O. Keys are looked up by their SHA-256 digest and confirmed with
``hmac.compare_digest``, so the lookup time says nothing about a key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rllm.schemas.types import Task

__all__ = ["DeltaState", "Session", "SessionRegistry"]

_EMPTY = np.zeros(0, dtype=np.int32)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class DeltaState:
    """What a session's next step is delta-encoded against, and its step and token totals."""

    last_step_id: str | None = None
    last_full_ids: npt.NDArray[np.int32] = field(default_factory=lambda: _EMPTY)
    num_steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Session:
    """One open session (one agent run)."""

    session_id: str
    run_id: str
    key: str
    task: Task
    model: str | None = None
    next_index: int = 0
    """step_index of the next call."""
    num_steps: int = 0
    """Steps captured so far (failed ones included)."""
    prompt_tokens: int = 0
    """Prompt tokens of every captured step, as the upstream reported them."""
    completion_tokens: int = 0
    """Completion tokens of every captured step, as the upstream reported them."""
    last_step_id: str | None = None
    """The last captured step with token IDs: the parent of the next delta."""
    last_full_ids: npt.NDArray[np.int32] = field(default_factory=lambda: _EMPTY)
    """Full prompt + response token IDs of ``last_step_id``."""
    last_seen: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` of the last call's start or end (for the idle timeout)."""
    in_flight: int = 0
    """Calls being served now; a session with one is never idle."""
    noted: set[str] = field(default_factory=set)
    """Request fields the gateway did not send upstream that were logged already."""

    @property
    def delta(self) -> DeltaState:
        """The session's delta state now."""
        return DeltaState(
            self.last_step_id,
            self.last_full_ids,
            self.num_steps,
            self.prompt_tokens,
            self.completion_tokens,
        )

    def advance(self, delta: DeltaState) -> None:
        """Take ``delta`` (what ``step_event`` returned for a step that was published)."""
        self.last_step_id, self.last_full_ids = delta.last_step_id, delta.last_full_ids
        self.num_steps = delta.num_steps
        self.prompt_tokens, self.completion_tokens = delta.prompt_tokens, delta.completion_tokens

    def take_index(self, count: int = 1) -> int:
        """Reserve the step_index of a call at dispatch (``count`` consecutive ones for a
        call asking for ``n = count`` choices); return the first."""
        index = self.next_index
        self.next_index += count
        self.last_seen = time.monotonic()
        return index

    def give_back(self, first: int, reserved: int, used: int) -> bool:
        """Return the unused end of a reservation when no later call took an index after
        it; whether it was returned (else the caller fills the indices it left)."""
        if used >= reserved or self.next_index != first + reserved:
            return used >= reserved
        self.next_index = first + used
        return True


class SessionRegistry:
    """Sessions by id and by key; closed ids are remembered (bounded) to refuse late calls."""

    def __init__(self, remember_closed: int = 100_000) -> None:
        self._by_id: dict[str, Session] = {}
        self._by_digest: dict[bytes, Session] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_closed

    def __len__(self) -> int:
        return len(self._by_id)

    def open(
        self,
        session_id: str,
        run_id: str,
        task: Task,
        model: str | None = None,
        key: str | None = None,
    ) -> Session:
        """Register a new session with a fresh key (or ``key``)."""
        session = Session(
            session_id=session_id,
            run_id=run_id,
            task=task,
            model=model,
            key=key or f"rllm-sk-{secrets.token_urlsafe(24)}",
        )
        self._by_id[session_id] = session
        self._by_digest[_digest(session.key)] = session
        self._closed.pop(session_id, None)
        return session

    def get(self, session_id: str) -> Session | None:
        """The open session with this id."""
        return self._by_id.get(session_id)

    def by_key(self, key: str) -> Session | None:
        """The open session whose key is ``key`` (constant-time confirmation)."""
        session = self._by_digest.get(_digest(key))
        if session is not None and hmac.compare_digest(session.key.encode(), key.encode()):
            return session
        return None

    def idle(self, timeout_s: float, now: float | None = None) -> list[Session]:
        """Open sessions without a call in flight and none for more than ``timeout_s``
        seconds (a session is never closed under a call it is serving)."""
        now = time.monotonic() if now is None else now
        return [
            s for s in self._by_id.values() if not s.in_flight and now - s.last_seen > timeout_s
        ]

    def is_closed(self, session_id: str) -> bool:
        """Whether this id was closed (and is still remembered)."""
        return session_id in self._closed

    def close(self, session_id: str) -> Session | None:
        """Forget an open session; return it (None if it was not open)."""
        session = self._by_id.pop(session_id, None)
        if session is not None:
            self._by_digest.pop(_digest(session.key), None)
            self._closed[session_id] = None
            while len(self._closed) > self._remember:
                self._closed.popitem(last=False)
        return session
