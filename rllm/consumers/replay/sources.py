"""Where replayed sessions come from: the history store, or the session-events topic read
by offset or time range.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rllm.consumers.history.types import HistoryStore
from rllm.consumers.replay.select import SessionRecord
from rllm.consumers.tail import tail_topic
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionOpened, StepCaptured
from rllm.settings import KafkaSettings

__all__ = ["sessions_from_history", "sessions_from_topic"]

_STEP_COLS = (
    "step_id",
    "step_index",
    "parent_step_id",
    "prompt_prefix_len",
    "prompt_token_ids",
    "response_token_ids",
    "request_json",
    "response_json",
    "error_kind",
    "token_status",
    "model",
)


_SESSIONS = """
SELECT o.session_id AS session_id, o.run_id AS run_id, o.task_id AS task_id,
       o.benchmark AS benchmark, o.model AS model, r.reward AS reward,
       r.is_correct AS is_correct
FROM (
    SELECT session_id, any(run_id) AS run_id, any(task_id) AS task_id,
           any(benchmark) AS benchmark, any(model) AS model
    FROM __DB__.sessions WHERE kind = 'opened' GROUP BY session_id
    HAVING {run:String} = '' OR run_id = {run:String}) AS o
LEFT JOIN (
    SELECT session_id, argMax(reward, emitted_at) AS reward,
           argMax(is_correct, emitted_at) AS is_correct
    FROM __DB__.rewards GROUP BY session_id) AS r ON r.session_id = o.session_id
ORDER BY run_id, session_id"""


def sessions_from_history(store: HistoryStore, run: str | None = None) -> list[SessionRecord]:
    """Sessions with their steps and rewards, read from the history."""
    db = f"`{store.database}`"
    meta = store.query(_SESSIONS.replace("__DB__", db), {"run": run or ""})
    sessions = {m["session_id"]: {**m, "steps": []} for m in meta.records()}
    steps = store.query(
        f"SELECT session_id, {', '.join(_STEP_COLS)} FROM {db}.steps FINAL "
        f"WHERE {{run:String}} = '' OR run_id = {{run:String}}",
        {"run": run or ""},
    )
    for row in steps.records():
        s = sessions.get(row.pop("session_id"))
        if s is not None:
            s["steps"].append(row)
    return list(sessions.values())


def _step_dict(p: StepCaptured) -> dict[str, Any]:
    return {
        "step_id": p.step_id,
        "step_index": p.step_index,
        "parent_step_id": p.parent_step_id or "",
        "prompt_prefix_len": p.prompt_prefix_len,
        "prompt_token_ids": p.prompt_token_ids,
        "response_token_ids": p.response_token_ids,
        "request_json": p.request_json,
        "response_json": p.response_json,
        "error_kind": p.error.kind if p.error else "",
        "token_status": p.token_status.value,
        "model": p.model,
    }


def sessions_from_topic(
    kafka: KafkaSettings,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[SessionRecord]:
    """Sessions read from ``rllm.session-events`` within an offset and/or time range.

    Offsets apply per partition: ``[start_offset, end_offset)``; times to ``emitted_at``.
    """
    sessions: dict[str, SessionRecord] = {}
    seen: set[str] = set()
    for rec in tail_topic(kafka, SESSION_EVENTS, from_beginning=True):
        if rec.event is None or not isinstance(rec.event, SessionEvent):
            continue
        if (start_offset is not None and rec.offset < start_offset) or (
            end_offset is not None and rec.offset >= end_offset
        ):
            continue
        ev = rec.event
        if (since and ev.emitted_at < since) or (until and ev.emitted_at >= until):
            continue
        if ev.event_id in seen:
            continue
        seen.add(ev.event_id)
        s = sessions.setdefault(
            ev.session_id,
            {
                "session_id": ev.session_id,
                "run_id": ev.run_id,
                "task_id": "",
                "benchmark": "",
                "model": "",
                "reward": None,
                "is_correct": None,
                "steps": [],
            },
        )
        p = ev.payload
        if isinstance(p, SessionOpened):
            s.update(task_id=p.task.task_id, benchmark=p.task.benchmark or "", model=p.model or "")
        elif isinstance(p, StepCaptured):
            s["steps"].append(_step_dict(p))
            s["model"] = s["model"] or p.model
        elif isinstance(p, RewardAssigned):
            s.update(reward=p.reward, is_correct=p.is_correct)
    return list(sessions.values())
