"""Pure assembly: a session's events -> one TrajectoryAssembled with full prompts restored.

Restoring a delta-encoded prompt: the full prompt of a step with ``prompt_prefix_len > 0``
is the first ``prompt_prefix_len`` tokens of (parent's full prompt + parent's response)
followed by the step's own ``prompt_token_ids``. Token arrays stay packed ``<i4`` bytes
(4 bytes per token), so restoring is byte slicing, not unpacking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rllm.processors.types import AssemblyError
from rllm.schemas.types import (
    RewardAssigned,
    SessionClosed,
    SessionEvent,
    SessionOpened,
    SessionStatus,
    StepCaptured,
    TokenStatus,
    TrajectoryAssembled,
)

__all__ = [
    "assemble_trajectory",
    "dedup_events",
    "delta_encode_dicts",
    "group_key",
    "order_steps",
    "restore_prompt_dicts",
    "restore_prompts",
    "trajectory_id",
]

_TOKEN_BYTES = 4


def trajectory_id(session_id: str) -> str:
    """Deterministic event id of a session's trajectory."""
    return f"traj:{session_id}"


def group_key(run_id: str, task_id: str) -> str:
    """Kafka key of rllm.trajectories and rllm.episodes."""
    return f"{run_id}/{task_id}"


def dedup_events(events: Iterable[SessionEvent]) -> list[SessionEvent]:
    """Drop events whose ``event_id`` was seen before, keeping the first, in order."""
    seen: set[str] = set()
    out = []
    for event in events:
        if event.event_id not in seen:
            seen.add(event.event_id)
            out.append(event)
    return out


def order_steps(steps: Iterable[StepCaptured]) -> tuple[list[StepCaptured], list[str]]:
    """Steps sorted by ``step_index`` (a repeated ``step_id`` keeps its first copy).

    Returns:
        The ordered steps and flags: ``duplicate_step`` (same step_id twice),
        ``duplicate_step_index`` and ``step_index_gap``.
    """
    flags: list[str] = []
    by_id: dict[str, StepCaptured] = {}
    for step in steps:
        if step.step_id in by_id:
            flags.append("duplicate_step")
            continue
        by_id[step.step_id] = step
    ordered = sorted(by_id.values(), key=lambda s: (s.step_index, s.step_id))
    indices = [s.step_index for s in ordered]
    if len(set(indices)) != len(indices):
        flags.append("duplicate_step_index")
    elif indices and indices != list(range(len(indices))):
        flags.append("step_index_gap")
    return ordered, sorted(set(flags))


def restore_prompts(steps: Sequence[StepCaptured]) -> tuple[list[StepCaptured], list[str]]:
    """Full prompts for ordered steps.

    Args:
        steps: the session's steps in ``step_index`` order.

    Returns:
        Steps with full ``prompt_token_ids`` and ``prompt_prefix_len == 0``, and flags
        (``unrestored_prompt`` when a parent is missing or too short; such a step is
        kept as it came, still delta-encoded).
    """
    full: dict[str, bytes] = {}
    out: list[StepCaptured] = []
    flags: list[str] = []
    for step in steps:
        prompt = step.prompt_token_ids
        if step.prompt_prefix_len > 0:
            parent = full.get(step.parent_step_id or "")
            need = step.prompt_prefix_len * _TOKEN_BYTES
            if parent is None or len(parent) < need:
                flags.append("unrestored_prompt")
                out.append(step)
                continue
            prompt = parent[:need] + step.prompt_token_ids
            step = step.model_copy(update={"prompt_token_ids": prompt, "prompt_prefix_len": 0})
        full[step.step_id] = prompt + step.response_token_ids
        out.append(step)
    return out, sorted(set(flags))


def restore_prompt_dicts(steps: Sequence[dict[str, Any]]) -> list[str]:
    """``restore_prompts`` on Avro-shaped step dicts (in ``step_index`` order), in place.

    Returns:
        Flags: ``unrestored_prompt`` when a parent is missing or too short (that step
        stays delta-encoded).
    """
    full: dict[str, bytes] = {}
    flags: list[str] = []
    for step in steps:
        need = step["prompt_prefix_len"] * _TOKEN_BYTES
        if need > 0:
            parent = full.get(step["parent_step_id"] or "")
            if parent is None or len(parent) < need:
                flags.append("unrestored_prompt")
                continue
            step["prompt_token_ids"] = parent[:need] + step["prompt_token_ids"]
            step["prompt_prefix_len"] = 0
        full[step["step_id"]] = step["prompt_token_ids"] + step["response_token_ids"]
    return sorted(set(flags))


def delta_encode_dicts(steps: Sequence[dict[str, Any]]) -> None:
    """The inverse of ``restore_prompt_dicts``, in place: a full prompt that starts with its
    parent's whole prompt + response keeps only the rest (``prompt_prefix_len`` > 0).

    Used to keep stored copies small; ``restore_prompt_dicts`` gives back the same bytes.
    """
    full: dict[str, bytes] = {}
    for step in steps:
        prompt = step["prompt_token_ids"]
        if step["prompt_prefix_len"] > 0:
            return  # already delta-encoded (or unrestored): leave the rest as it is
        full[step["step_id"]] = prompt + step["response_token_ids"]
        parent = full.get(step["parent_step_id"] or "")
        if parent and len(parent) <= len(prompt) and prompt.startswith(parent):
            step["prompt_token_ids"] = prompt[len(parent) :]
            step["prompt_prefix_len"] = len(parent) // _TOKEN_BYTES


def assemble_trajectory(
    events: Sequence[SessionEvent], *, idle_timeout: bool = False, restore: bool = True
) -> TrajectoryAssembled:
    """Assemble one session (events in arrival order, duplicates allowed).

    The reward is the last RewardAssigned's, if any (scoring fills it in otherwise).
    ``idle_timeout`` closes a session that never sent SessionClosed with status
    ``timeout`` and flag ``idle_timeout``; its ``closed_at`` is its last event's time.
    ``restore=False`` keeps prompts delta-encoded (the internal scoring hop; scoring
    restores them with ``restore_prompt_dicts``, which adds the same flags).

    Raises:
        AssemblyError: without SessionOpened, without any event, or (unless
            ``idle_timeout``) without SessionClosed.
    """
    events = dedup_events(events)
    if not events:
        raise AssemblyError("cannot assemble a trajectory from no events")
    first = events[0]
    opened = next((e for e in events if isinstance(e.payload, SessionOpened)), None)
    if opened is None:
        raise AssemblyError(
            f"session {first.session_id!r} has no SessionOpened among its {len(events)} "
            "events; its task and group are unknown"
        )
    closed = next((e for e in events if isinstance(e.payload, SessionClosed)), None)
    if closed is None and not idle_timeout:
        raise AssemblyError(f"session {first.session_id!r} is not closed yet")
    rewards = [e.payload for e in events if isinstance(e.payload, RewardAssigned)]
    steps, flags = order_steps(e.payload for e in events if isinstance(e.payload, StepCaptured))
    if restore:
        steps, restore_flags = restore_prompts(steps)
        flags += restore_flags
    if any(s.token_status == TokenStatus.MISSING for s in steps):
        flags.append("missing_tokens")
    op = opened.payload
    assert isinstance(op, SessionOpened)
    if closed is not None:
        cp = closed.payload
        assert isinstance(cp, SessionClosed)
        status, output, error, reported = cp.status, cp.output_json, cp.error, cp.num_steps
        closed_at = closed.emitted_at
        if reported != len(steps):
            flags.append("step_count_mismatch")
    else:
        status, output, reported = SessionStatus.TIMEOUT, None, 0
        error = "no SessionClosed: closed by the processors' idle timeout"
        closed_at = max(e.emitted_at for e in events)
        flags.append("idle_timeout")
    reward = rewards[-1] if rewards else None
    return TrajectoryAssembled(
        event_id=trajectory_id(first.session_id),
        session_id=first.session_id,
        run_id=opened.run_id,
        task=op.task,
        rollout_index=op.rollout_index,
        group_size=op.group_size,
        trajectory_name=op.trajectory_name,
        agent=op.agent,
        steps=tuple(steps),
        status=status,
        output_json=output,
        error=error,
        num_steps_reported=reported,
        reward=None if reward is None else reward.reward,
        is_correct=None if reward is None else reward.is_correct,
        reward_signals={} if reward is None else dict(reward.signals),
        evaluator="" if reward is None else reward.evaluator,
        opened_at=opened.emitted_at,
        closed_at=closed_at,
        flags=tuple(sorted(set(flags))),
    )
