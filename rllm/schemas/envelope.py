"""The one builder of ``SessionEvent`` envelopes."""

from __future__ import annotations

import uuid

from rllm.schemas.types import SessionEvent, SessionPayload

__all__ = ["envelope"]


def envelope(session_id: str, run_id: str, producer: str, payload: SessionPayload) -> SessionEvent:
    """The ``SessionEvent`` carrying ``payload`` for a session, with a fresh random ``event_id``."""
    return SessionEvent(
        event_id=uuid.uuid4().hex,
        session_id=session_id,
        run_id=run_id,
        producer=producer,
        payload=payload,
    )
