"""Assembly on pydantic models: a session's events -> one TrajectoryAssembled.

The work is ``assemble_dicts.assemble_trajectory_dict``, the one the worker runs; this
is it for callers holding models. Prompt delta encoding and restoring are
``rllm.schemas.delta``'s; the names below are kept for the callers that import them
from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from rllm.processors.assemble_dicts import assemble_trajectory_dict, order_steps, trajectory_id
from rllm.schemas.convert import from_avro, to_avro
from rllm.schemas.delta import encode_step_dicts as delta_encode_dicts
from rllm.schemas.delta import restore_step_dicts
from rllm.schemas.delta import restore_step_dicts as restore_prompt_dicts
from rllm.schemas.delta import restore_steps as restore_prompts
from rllm.schemas.types import SessionEvent, TrajectoryAssembled

__all__ = [
    "assemble_trajectory",
    "delta_encode_dicts",
    "group_key",
    "order_steps",
    "restore_prompt_dicts",
    "restore_prompts",
    "trajectory_id",
]

_TRAJ = TrajectoryAssembled.avro_name


def group_key(run_id: str, task_id: str) -> str:
    """Kafka key of rllm.trajectories and rllm.episodes."""
    return f"{run_id}/{task_id}"


def assemble_trajectory(
    events: Sequence[SessionEvent], *, idle_timeout: bool = False, restore: bool = True
) -> TrajectoryAssembled:
    """Assemble one session (events in arrival order, duplicates allowed); see
    ``assemble_trajectory_dict``.

    ``restore=False`` gives the trajectory as the worker publishes it (steps
    delta-encoded); the default restores full prompts and requests
    (``rllm.schemas.delta.restore_steps``), adding the same flags.

    Raises:
        AssemblyError: without SessionOpened, without any event, or (unless
            ``idle_timeout``) without SessionClosed.
    """
    traj = assemble_trajectory_dict([to_avro(e) for e in events], idle_timeout=idle_timeout)
    if restore:
        traj["flags"] = sorted(set(traj["flags"]) | set(restore_step_dicts(traj["steps"])))
    result: TrajectoryAssembled = from_avro(_TRAJ, traj)
    return result
