"""Turn a trajectory's steps into training sequences with loss masks.

Only tokens the model sampled carry loss; prompts and tool output (the part of a later
prompt that the model did not sample) are masked. A step whose prompt extends the previous
sequence is merged into it, so a multi-turn run trains as one sequence.
"""

from __future__ import annotations

from rllm.consumers.trainer.errors import MissingTokensError
from rllm.consumers.trainer.types import TrainSequence
from rllm.schemas.types import StepCaptured, TokenStatus, TrajectoryAssembled

__all__ = ["check_tokens", "trajectory_sequences"]


def check_tokens(traj: TrajectoryAssembled) -> None:
    """Refuse a trajectory with a ``tokens=missing`` step.

    Raises:
        MissingTokensError: naming the session and the step.
    """
    for step in traj.steps:
        if step.error is None and step.token_status is TokenStatus.MISSING:
            raise MissingTokensError(
                f"session {traj.session_id} (run {traj.run_id}, task {traj.task.task_id}) "
                f"has step {step.step_id} with tokens=missing: it is kept for eval and "
                f"analytics but cannot be trained on; serve the model through an upstream "
                f"that returns token IDs (vLLM return_token_ids, rllm-cli serve)"
            )
        if step.error is None and step.prompt_prefix_len:
            raise MissingTokensError(
                f"session {traj.session_id} step {step.step_id} is still delta-encoded "
                f"(prompt_prefix_len={step.prompt_prefix_len}); trajectories must come "
                f"from the assembler with full prompts"
            )


def _trainable(step: StepCaptured) -> bool:
    return step.error is None and len(step.response_token_ids) > 0


def trajectory_sequences(
    traj: TrajectoryAssembled,
    episode_id: str,
    advantage: float,
    merge_steps: bool = True,
) -> list[TrainSequence]:
    """Sequences of one trajectory: one per step, or merged where prompts extend.

    Args:
        traj: An assembled trajectory (full prompts).
        episode_id: Id of its episode.
        advantage: Its advantage, broadcast over its sampled tokens.
        merge_steps: Merge a step into the previous sequence when its prompt starts with
            that sequence's tokens.

    Raises:
        MissingTokensError: if a step has no token IDs.
    """
    check_tokens(traj)
    out: list[TrainSequence] = []
    cur: TrainSequence | None = None
    for step in traj.steps:
        if not _trainable(step):
            continue
        prompt = step.prompt_ids.tolist()
        response = step.response_ids.tolist()
        logprobs = step.logprobs.tolist()
        if len(logprobs) != len(response):
            raise MissingTokensError(
                f"session {traj.session_id} step {step.step_id} has {len(response)} "
                f"response tokens but {len(logprobs)} logprobs"
            )
        n = len(cur.input_ids_T) if cur is not None else 0
        if merge_steps and cur is not None and len(prompt) >= n and prompt[:n] == cur.input_ids_T:
            tail = prompt[n:]
            cur.input_ids_T += tail + response
            cur.loss_mask_T += [0] * len(tail) + [1] * len(response)
            cur.logprobs_T += [0.0] * len(tail) + logprobs
            cur.step_ids = (*cur.step_ids, step.step_id)
            cur.policy_version = min(cur.policy_version, step.policy_version)
            continue
        cur = TrainSequence(
            episode_id=episode_id,
            session_id=traj.session_id,
            step_ids=(step.step_id,),
            input_ids_T=prompt + response,
            loss_mask_T=[0] * len(prompt) + [1] * len(response),
            logprobs_T=[0.0] * len(prompt) + logprobs,
            advantage=advantage,
            policy_version=step.policy_version,
        )
        out.append(cur)
    return out
