"""Assembly on pydantic models: a session's events -> one TrajectoryAssembled.

The work is ``assemble_dicts.assemble_trajectory_dict``, the one the worker runs; this
is it for callers holding models. Prompt delta encoding and restoring are
``rllm.schemas.delta``'s, ids and keys ``rllm.schemas.ids``'.
"""

from __future__ import annotations

from collections.abc import Sequence

from rllm.processors.assemble_dicts import assemble_trajectory_dict, order_steps
from rllm.schemas.convert import from_avro, to_avro
from rllm.schemas.delta import restore_step_dicts
from rllm.schemas.types import SessionEvent, TrajectoryAssembled

__all__ = ["assemble_trajectory", "order_steps"]


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
    result: TrajectoryAssembled = from_avro(TrajectoryAssembled.avro_name, traj)
    return result
