"""Assembly on Avro-shaped dicts, the one the worker runs: a session's SessionEvent dicts
-> one TrajectoryAssembled dict, its steps delta-encoded (``rllm.schemas.delta``) so the
session's tokens and requests are carried once, on the scoring hop and on
``rllm.trajectories`` alike. ``assemble.assemble_trajectory`` is this on pydantic models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from rllm.processors.errors import AssemblyError
from rllm.schemas.delta import encode_step_dicts
from rllm.schemas.ids import trajectory_id
from rllm.schemas.types import RewardAssigned, SessionClosed, SessionOpened, StepCaptured

__all__ = ["assemble_trajectory_dict", "order_steps"]

_OPENED, _CLOSED, _REWARD, _STEP = (
    SessionOpened.avro_name,
    SessionClosed.avro_name,
    RewardAssigned.avro_name,
    StepCaptured.avro_name,
)

S = TypeVar("S")


def _field(step: Any, name: str) -> Any:
    return step[name] if isinstance(step, Mapping) else getattr(step, name)


def order_steps(steps: Iterable[S]) -> tuple[list[S], list[str]]:
    """Steps (``StepCaptured`` models or their dicts) sorted by ``step_index``; a repeated
    ``step_id`` keeps its first copy.

    Returns:
        The ordered steps and flags: ``duplicate_step`` (same step_id twice),
        ``duplicate_step_index`` and ``step_index_gap``.
    """
    flags: list[str] = []
    by_id: dict[str, S] = {}
    for step in steps:
        if _field(step, "step_id") in by_id:
            flags.append("duplicate_step")
            continue
        by_id[_field(step, "step_id")] = step
    ordered = sorted(by_id.values(), key=lambda s: (_field(s, "step_index"), _field(s, "step_id")))
    indices = [_field(s, "step_index") for s in ordered]
    if len(set(indices)) != len(indices):
        flags.append("duplicate_step_index")
    elif indices and indices != list(range(len(indices))):
        flags.append("step_index_gap")
    return ordered, sorted(set(flags))


def assemble_trajectory_dict(
    events: Sequence[dict[str, Any]], *, idle_timeout: bool = False
) -> dict[str, Any]:
    """A TrajectoryAssembled dict from SessionEvent dicts in arrival order (duplicates
    allowed); the step dicts are delta-encoded in place.

    The reward is the last RewardAssigned's, if any (scoring fills it in otherwise).
    ``idle_timeout`` closes a session that never sent SessionClosed with status
    ``timeout`` and flag ``idle_timeout``; its ``closed_at`` is its last event's time. A
    step whose prompt or request cannot be restored (its parent is missing) is flagged
    ``unrestored_prompt`` / ``unrestored_request`` and kept as it came.

    Raises:
        AssemblyError: without SessionOpened, without any event, or (unless
            ``idle_timeout``) without SessionClosed.
    """
    seen: set[str] = set()
    unique = []
    for e in events:
        if e["event_id"] not in seen:
            seen.add(e["event_id"])
            unique.append(e)
    if not unique:
        raise AssemblyError("cannot assemble a trajectory from no events")
    first = unique[0]
    opened = next((e for e in unique if e["payload"][0] == _OPENED), None)
    if opened is None:
        raise AssemblyError(
            f"session {first['session_id']!r} has no SessionOpened among its {len(unique)} "
            "events; its task and group are unknown"
        )
    closed = next((e for e in unique if e["payload"][0] == _CLOSED), None)
    if closed is None and not idle_timeout:
        raise AssemblyError(f"session {first['session_id']!r} is not closed yet")
    rewards = [e["payload"][1] for e in unique if e["payload"][0] == _REWARD]
    steps, flags = order_steps([e["payload"][1] for e in unique if e["payload"][0] == _STEP])
    flags += encode_step_dicts(steps)
    if any(s["token_status"] == "missing" for s in steps):
        flags.append("missing_tokens")
    op = opened["payload"][1]
    if closed is not None:
        cp = closed["payload"][1]
        status, output, error, reported = (
            cp["status"],
            cp["output_json"],
            cp["error"],
            cp["num_steps"],
        )
        closed_at = closed["emitted_at"]
        if reported != len(steps):
            flags.append("step_count_mismatch")
    else:
        status, output, reported = "timeout", None, 0
        error = "no SessionClosed: closed by the processors' idle timeout"
        closed_at = max(e["emitted_at"] for e in unique)
        flags.append("idle_timeout")
    reward = rewards[-1] if rewards else None
    return {
        "event_id": trajectory_id(first["session_id"]),
        "session_id": first["session_id"],
        "run_id": opened["run_id"],
        "task": op["task"],
        "rollout_index": op["rollout_index"],
        "group_size": op["group_size"],
        "trajectory_name": op["trajectory_name"],
        "agent": op["agent"],
        "steps": steps,
        "status": status,
        "output_json": output,
        "error": error,
        "num_steps_reported": reported,
        "reward": None if reward is None else reward["reward"],
        "is_correct": None if reward is None else reward["is_correct"],
        "reward_signals": {} if reward is None else dict(reward["signals"]),
        "reward_error": None,
        "evaluator": "" if reward is None else reward["evaluator"],
        "opened_at": opened["emitted_at"],
        "closed_at": closed_at,
        "flags": sorted(set(flags)),
    }
