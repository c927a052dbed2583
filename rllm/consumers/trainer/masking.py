"""Turn a trajectory's steps into training sequences with loss masks (``masking``: which
tokens carry loss, not hiding data).

Only tokens the model sampled carry loss; prompts and tool output (the part of a later
prompt that the model did not sample) are masked. A step whose prompt extends the previous
sequence is merged into it, so a multi-turn run trains as one sequence.

Steps come delta-encoded (as on rllm.trajectories and rllm.episodes) or with full prompts;
``rllm.schemas.delta.full_prompts`` restores them one at a time, and the running sequence
is compared as packed bytes, so a long session costs memory linear in its tokens.
"""

from __future__ import annotations

import json
from typing import Any

from rllm.consumers.trainer.errors import MissingTokensError, UnreproducibleSamplingError
from rllm.consumers.trainer.types import StepSampling, TrainSequence
from rllm.schemas.delta import full_prompts, unrestorable_prompts
from rllm.schemas.tokens import unpack_tokens
from rllm.schemas.types import StepCaptured, TokenStatus, TrajectoryAssembled

__all__ = ["check_tokens", "step_sampling", "trajectory_sequences"]


def check_tokens(traj: TrajectoryAssembled) -> None:
    """Refuse a trajectory with a ``tokens=missing`` step or a prompt that cannot be
    restored (checked from lengths, no token copied).

    Raises:
        MissingTokensError: naming the session and the step.
    """
    unrestorable = set(unrestorable_prompts(traj.steps))
    for step in traj.steps:
        if step.error is None and step.token_status is TokenStatus.MISSING:
            raise MissingTokensError(
                f"session {traj.session_id} (run {traj.run_id}, task {traj.task.task_id}) "
                f"has step {step.step_id} with tokens=missing: it is kept for eval and "
                f"analytics but cannot be trained on; serve the model through an upstream "
                f"that returns token IDs (vLLM return_token_ids, rllm-cli serve)"
            )
        if step.error is None and step.step_id in unrestorable:
            raise MissingTokensError(
                f"session {traj.session_id} step {step.step_id} has a delta-encoded prompt "
                f"(prompt_prefix_len={step.prompt_prefix_len}) that cannot be restored: its "
                f"parent step {step.parent_step_id!r} is missing from the trajectory or "
                f"shorter than the prefix"
            )


_NEUTRAL: dict[str, Any] = {
    "min_p": 0.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
}
"""Sampling parameters that change the distribution and that no backend reproduces, with
the value at which they do nothing."""


def step_sampling(
    step: StepCaptured, session_id: str, scored: frozenset[str] | None = None
) -> StepSampling:
    """How ``step`` was sampled, from its recorded request parameters (OpenAI defaults:
    temperature 1, no cut), checked against what the backend scores with.

    Args:
        step: The step.
        session_id: Its session, for the message.
        scored: The ``StepSampling`` fields the backend applies when scoring
            (``Capabilities.sampling``); None: all of them.

    Raises:
        UnreproducibleSamplingError: naming the step, the parameter and its value.
    """
    try:
        params = json.loads(step.sampling_params_json or "{}")
    except ValueError:
        params = {}
    params = params if isinstance(params, dict) else {}
    for name, neutral in _NEUTRAL.items():
        value = params.get(name)
        if value is not None and value != neutral:
            raise UnreproducibleSamplingError(
                f"session {session_id} step {step.step_id} was sampled with {name}={value!r}, "
                f"which the trainer cannot reproduce when it scores the tokens (the importance "
                f"ratio would compare two distributions); sample without {name}"
            )

    def num(name: str, default: float) -> float:
        value = params.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return default

    temperature = num("temperature", 1.0)
    sampling = (
        StepSampling(temperature=0.0)  # greedy: the raw distribution, scored by every backend
        if temperature <= 0
        else StepSampling(temperature, num("top_p", 1.0), max(int(num("top_k", 0)), 0))
    )
    unscored = {
        k: v
        for k, v in sampling.non_default().items()
        if scored is not None and k not in scored and sampling.temperature > 0
    }
    if unscored:
        what = ", ".join(f"{k}={v}" for k, v in unscored.items())
        applies = ", ".join(sorted(scored or ())) or "temperature 1 and no top-k/top-p cut"
        raise UnreproducibleSamplingError(
            f"session {session_id} step {step.step_id} was sampled with {what}, but this "
            f"backend scores tokens with {applies} only, so its importance ratio would be "
            f"wrong; sample with the defaults or train with a backend that applies them (local)"
        )
    return sampling


def _trainable(step: StepCaptured) -> bool:
    return step.error is None and len(step.response_token_ids) > 0


def trajectory_sequences(
    traj: TrajectoryAssembled,
    episode_id: str,
    advantage: float,
    merge_steps: bool = True,
    scored: frozenset[str] | None = None,
) -> list[TrainSequence]:
    """Sequences of one trajectory: one per step, or merged where prompts extend and the
    steps were sampled alike.

    Args:
        traj: An assembled trajectory (steps delta-encoded or with full prompts).
        episode_id: Id of its episode.
        advantage: Its advantage, broadcast over its sampled tokens.
        merge_steps: Merge a step into the previous sequence when its prompt starts with
            that sequence's tokens.
        scored: What the backend scores with (see ``step_sampling``).

    Raises:
        MissingTokensError: if a step has no token IDs.
        UnreproducibleSamplingError: if a step was sampled as the backend cannot score.
    """
    check_tokens(traj)
    out: list[TrainSequence] = []
    cur: TrainSequence | None = None
    cur_ids = bytearray()  # cur.input_ids_T packed like the steps' prompts
    for step, full in zip(traj.steps, full_prompts(traj.steps), strict=True):
        if not _trainable(step):
            continue
        assert full is not None  # check_tokens refused unrestorable trainable steps
        response = step.response_ids.tolist()
        logprobs = step.logprobs.tolist()
        if len(logprobs) != len(response):
            raise MissingTokensError(
                f"session {traj.session_id} step {step.step_id} has {len(response)} "
                f"response tokens but {len(logprobs)} logprobs"
            )
        sampling = step_sampling(step, traj.session_id, scored)
        extends = cur is not None and full.startswith(cur_ids)
        if merge_steps and cur is not None and extends and cur.sampling == sampling:
            tail = unpack_tokens(full[len(cur_ids) :]).tolist()
            cur.input_ids_T += tail + response
            cur.loss_mask_T += [0] * len(tail) + [1] * len(response)
            cur.logprobs_T += [0.0] * len(tail) + logprobs
            cur.step_ids = (*cur.step_ids, step.step_id)
            cur.policy_version = min(cur.policy_version, step.policy_version)
            cur_ids += full[len(cur_ids) :]
            cur_ids += step.response_token_ids
            continue
        prompt = unpack_tokens(full).tolist()
        cur = TrainSequence(
            episode_id=episode_id,
            session_id=traj.session_id,
            step_ids=(step.step_id,),
            input_ids_T=prompt + response,
            loss_mask_T=[0] * len(prompt) + [1] * len(response),
            logprobs_T=[0.0] * len(prompt) + logprobs,
            advantage=advantage,
            policy_version=step.policy_version,
            sampling=sampling,
        )
        cur_ids = bytearray(full)
        cur_ids += step.response_token_ids
        out.append(cur)
    return out
