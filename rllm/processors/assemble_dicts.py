"""``assemble_trajectory`` on Avro-shaped dicts: the worker's fast path (no pydantic model
per event), same output, prompts left delta-encoded (scoring restores them).

Equivalence with ``assemble_trajectory(events, restore=False)`` is tested byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rllm.processors.assemble import trajectory_id
from rllm.processors.types import AssemblyError

__all__ = ["assemble_trajectory_dict"]

_P = "rllm.events."
_OPENED, _CLOSED, _REWARD, _STEP = (
    _P + n for n in ("SessionOpened", "SessionClosed", "RewardAssigned", "StepCaptured")
)


def _order_steps(steps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    flags: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    for step in steps:
        if step["step_id"] in by_id:
            flags.append("duplicate_step")
            continue
        by_id[step["step_id"]] = step
    ordered = sorted(by_id.values(), key=lambda s: (s["step_index"], s["step_id"]))
    indices = [s["step_index"] for s in ordered]
    if len(set(indices)) != len(indices):
        flags.append("duplicate_step_index")
    elif indices and indices != list(range(len(indices))):
        flags.append("step_index_gap")
    return ordered, flags


def assemble_trajectory_dict(
    events: Sequence[dict[str, Any]], *, idle_timeout: bool = False
) -> dict[str, Any]:
    """A TrajectoryAssembled dict from SessionEvent dicts in arrival order.

    Raises:
        AssemblyError: as ``assemble_trajectory``.
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
    steps, flags = _order_steps([e["payload"][1] for e in unique if e["payload"][0] == _STEP])
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
