"""Pure mapping from decoded events (Avro-shaped dicts) to history rows.

No I/O here: the sink decodes, calls :func:`event_rows`, buffers the rows in a
:class:`~rllm.consumers.history.batch.RowBuffer`, and inserts its batches.
"""

from __future__ import annotations

import json
from typing import Any

from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.types import DeadLetter, EpisodeAssembled, SessionEvent, TrajectoryAssembled

__all__ = ["Position", "Row", "dead_letter_row", "event_rows", "letter_row"]

Position = tuple[str, int, int]
"""Where a record was read: (topic, partition, offset)."""

Row = tuple[str, dict[str, Any]]
"""A history row and the table it goes to."""


def _task(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task["task_id"],
        "benchmark": task.get("benchmark") or "",
        "task_json": json.dumps(task, default=str),
    }


def _envelope(env: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": env["event_id"],
        "session_id": env["session_id"],
        "run_id": env["run_id"],
        "emitted_at": env["emitted_at"],
        "producer": env.get("producer", ""),
    }


def _source(pos: Position) -> dict[str, Any]:
    return {"topic": pos[0], "partition": pos[1], "offset": pos[2]}


def _step_row(env: dict[str, Any], p: dict[str, Any], pos: Position) -> dict[str, Any]:
    err = p.get("error") or {}
    usage = p.get("usage") or {}
    return {
        **_envelope(env),
        **_source(pos),
        "step_id": p["step_id"],
        "step_index": p["step_index"],
        "parent_step_id": p.get("parent_step_id") or "",
        "api": p["api"],
        "model": p["model"],
        "upstream": p.get("upstream", ""),
        "policy_version": p.get("policy_version", 0),
        "started_at": p["started_at"],
        "latency_ms": p.get("latency_ms", 0.0),
        "ttft_ms": p.get("ttft_ms"),
        "overhead_ms": p.get("overhead_ms", 0.0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "cached_tokens": usage.get("cached_tokens", 0),
        "prompt_prefix_len": p.get("prompt_prefix_len", 0),
        "n_prompt_ids": len(p.get("prompt_token_ids", b"")) // 4,
        "n_response_ids": len(p.get("response_token_ids", b"")) // 4,
        "token_status": p.get("token_status", "ok"),
        "finish_reason": p.get("finish_reason") or "",
        "error_kind": err.get("kind", ""),
        "error_message": err.get("message", ""),
        "error_status": err.get("status_code") or 0,
        "request_json": p.get("request_json", "{}"),
        "response_json": p.get("response_json", "{}"),
        "sampling_params_json": p.get("sampling_params_json", "{}"),
        "prompt_token_ids": p.get("prompt_token_ids", b""),
        "response_token_ids": p.get("response_token_ids", b""),
        "response_logprobs": p.get("response_logprobs", b""),
    }


def _session_rows(env: dict[str, Any], pname: str, p: dict[str, Any], pos: Position) -> list[Row]:
    base = _envelope(env)
    if pname.endswith("StepCaptured"):
        return [("steps", _step_row(env, p, pos))]
    if pname.endswith("SessionOpened"):
        row = {
            **base,
            **_source(pos),
            **_task(p["task"]),
            "kind": "opened",
            "agent": p.get("agent", ""),
            "model": p.get("model") or "",
            "trajectory_name": p.get("trajectory_name", "default"),
            "rollout_index": p.get("rollout_index", 0),
            "group_size": p.get("group_size", 1),
            "policy_version": p.get("policy_version", 0),
            "metadata_json": p.get("metadata_json", "{}"),
        }
        run = {
            "run_id": env["run_id"],
            "event_id": env["event_id"],
            "seen_at": env["emitted_at"],
            "kind": "session",
            "model": row["model"],
            "benchmark": row["benchmark"],
            "agent": row["agent"],
        }
        return [("sessions", row), ("runs", run)]
    if pname.endswith("SessionClosed"):
        row = {
            **base,
            **_source(pos),
            "kind": "closed",
            "status": p["status"],
            "num_steps": p.get("num_steps", 0),
            "error": p.get("error") or "",
            "output_json": p.get("output_json") or "",
        }
        return [("sessions", row)]
    if pname.endswith("RewardAssigned"):
        correct = p.get("is_correct")
        return [
            (
                "rewards",
                {
                    **base,
                    "source": "event",
                    "reward": p["reward"],
                    "is_correct": None if correct is None else int(correct),
                    "signals": p.get("signals") or {},
                    "evaluator": p.get("evaluator", ""),
                    "metadata_json": p.get("metadata_json", "{}"),
                },
            )
        ]
    return []


def _trajectory_rows(d: dict[str, Any]) -> list[Row]:
    steps = d.get("steps") or []
    versions = [s.get("policy_version", 0) for s in steps] or [0]
    correct = d.get("is_correct")
    model = steps[0]["model"] if steps else ""
    env = {
        "event_id": d["event_id"],
        "session_id": d["session_id"],
        "run_id": d["run_id"],
        "emitted_at": d.get("closed_at"),
        "producer": "assemble",
    }
    row = {
        **env,
        **_task(d["task"]),
        "agent": d.get("agent", ""),
        "model": model,
        "trajectory_name": d.get("trajectory_name", "default"),
        "rollout_index": d.get("rollout_index", 0),
        "group_size": d.get("group_size", 1),
        "status": d["status"],
        "num_steps": len(steps),
        "num_steps_reported": d.get("num_steps_reported", 0),
        "step_ids": [s["step_id"] for s in steps],
        "min_policy_version": min(versions),
        "max_policy_version": max(versions),
        "response_tokens": sum(len(s.get("response_token_ids", b"")) // 4 for s in steps),
        "reward": d.get("reward"),
        "is_correct": None if correct is None else int(correct),
        "reward_error": d.get("reward_error") or "",
        "evaluator": d.get("evaluator", ""),
        "opened_at": d.get("opened_at"),
        "closed_at": d.get("closed_at"),
        "flags": list(d.get("flags") or []),
        "output_json": d.get("output_json") or "",
    }
    rows: list[Row] = [("trajectories", row)]
    if d.get("reward") is not None:
        rows.append(
            (
                "rewards",
                {
                    **env,
                    "source": "trajectory",
                    "reward": d["reward"],
                    "is_correct": row["is_correct"],
                    "signals": d.get("reward_signals") or {},
                    "evaluator": d.get("evaluator", ""),
                    "metadata_json": "{}",
                },
            )
        )
    return rows


def event_rows(name: str, datum: dict[str, Any], pos: Position) -> list[Row]:
    """The history rows of one decoded event.

    Args:
        name: the Avro record's full name.
        datum: the Avro-shaped dict (``AvroCodec.decode_dict``).
        pos: where the record was read.

    Returns:
        ``(table, row)`` pairs; empty for a record history does not keep.
    """
    if name == SessionEvent.avro_name:
        pname, payload = datum["payload"]
        return _session_rows(datum, pname, payload, pos)
    if name == TrajectoryAssembled.avro_name:
        return _trajectory_rows(datum)
    if name == EpisodeAssembled.avro_name:
        trajs = datum.get("trajectories") or []
        task = datum["task"]
        return [
            (
                "episodes",
                {
                    "event_id": datum["event_id"],
                    "run_id": datum["run_id"],
                    "task_id": task["task_id"],
                    "benchmark": task.get("benchmark") or "",
                    "session_ids": [t["session_id"] for t in trajs],
                    "rewards": list(datum.get("rewards") or []),
                    "advantages": list(datum.get("advantages") or []),
                    "estimator": datum.get("estimator", ""),
                    "group_size": datum["group_size"],
                    "is_partial": int(datum.get("is_partial", False)),
                    "uniform_reward": int(datum.get("uniform_reward", False)),
                    "assembled_at": datum.get("assembled_at"),
                },
            )
        ]
    if name == PolicyUpdated.avro_name:
        return [
            ("policy_updates", {**datum, "metrics": datum.get("metrics") or {}}),
            (
                "runs",
                {
                    "run_id": datum["run_id"],
                    "event_id": datum["event_id"],
                    "seen_at": datum.get("created_at"),
                    "kind": "train",
                    "model": datum.get("base_model", ""),
                    "benchmark": "",
                    "agent": "",
                },
            ),
        ]
    if name == DeadLetter.avro_name:
        return [
            (
                "dead_letters",
                {
                    **datum,
                    "key": datum.get("key") or b"",
                    "event_id": f"dlq:{pos[0]}:{pos[1]}:{pos[2]}",
                },
            )
        ]
    return []


def dead_letter_row(
    pos: Position, key: bytes | None, value: bytes, exc: BaseException, consumer: str = "history"
) -> Row:
    """The dead_letters row of a record the sink could not decode or map."""
    return letter_row(
        DeadLetter(
            source_topic=pos[0],
            source_partition=pos[1],
            source_offset=pos[2],
            key=key,
            value=value,
            reason=str(exc),
            error_type=type(exc).__name__,
            consumer=consumer,
        )
    )


def letter_row(letter: DeadLetter) -> Row:
    """The dead_letters row of a record the sink refused (the reader's ``DeadLetter``)."""
    return (
        "dead_letters",
        {
            "event_id": f"sink:{letter.source_topic}:{letter.source_partition}:"
            f"{letter.source_offset}",
            "source_topic": letter.source_topic,
            "source_partition": letter.source_partition,
            "source_offset": letter.source_offset,
            "key": letter.key or b"",
            "value": letter.value,
            "reason": letter.reason[:2000],
            "error_type": letter.error_type,
            "consumer": letter.consumer,
            "failed_at": letter.failed_at,
        },
    )
