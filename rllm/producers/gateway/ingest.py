"""``POST /v1/events``: external agents publish session events as a JSON batch.

Each event is validated against the schemas (``from_json_dict``); a bad one is refused
with its index and reason, the good ones are published with the gateway's guarantees.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError

from rllm.errors import RllmError
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.state import GatewayState
from rllm.schemas.convert import from_json_dict
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionEvent

__all__ = ["ingest_events", "validate_events"]


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return str(exc)


def validate_events(
    items: list[Any], only_session: Session | None
) -> tuple[list[tuple[int, SessionEvent]], list[dict[str, Any]]]:
    """Split a batch into ``(index, event)`` pairs and ``{"index", "error"}`` refusals."""
    good: list[tuple[int, SessionEvent]] = []
    errors: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(
                {"index": i, "error": f"event must be a JSON object, got {type(item).__name__}"}
            )
            continue
        try:
            event = from_json_dict("SessionEvent", item)
        except (ValidationError, ValueError, RllmError) as exc:
            errors.append({"index": i, "error": _reason(exc)})
            continue
        if only_session is not None and event.session_id != only_session.session_id:
            errors.append(
                {"index": i, "error": f"session key does not cover session {event.session_id!r}"}
            )
            continue
        good.append((i, event))
    return good, errors


async def ingest_events(
    state: GatewayState, body: Any, only_session: Session | None
) -> tuple[int, dict[str, Any]]:
    """Validate and publish a batch; return the HTTP status and the answer body."""
    items = body.get("events") if isinstance(body, dict) else body
    if not isinstance(items, list):
        return 400, {
            "error": {
                "message": 'body must be a list of events or {"events": [...]}',
                "type": "invalid_request_error",
            }
        }
    good, errors = validate_events(items, only_session)
    state.settle()  # after the steps the gateway captured before them
    results = await asyncio.gather(
        *(state.sink.emit(SESSION_EVENTS, ev.session_id, ev, wait=True) for _, ev in good),
        return_exceptions=True,
    )
    accepted = 0
    for (i, _), result in zip(good, results, strict=True):
        if isinstance(result, BaseException):
            errors.append({"index": i, "error": str(result)})
        else:
            accepted += 1
    errors.sort(key=lambda e: int(e["index"]))
    status = 200 if not errors else (207 if accepted else 400)
    return status, {"accepted": accepted, "errors": errors}
