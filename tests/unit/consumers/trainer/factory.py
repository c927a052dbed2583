"""Build EpisodeAssembled records with real token arrays, and the settings of a trainer on
the tiny model, for trainer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rllm.consumers.trainer.batching import episode_sequences
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainSequence
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens


def step(
    step_id: str,
    prompt: list[int],
    response: list[int],
    version: int = 0,
    logprobs: list[float] | None = None,
    missing: bool = False,
    index: int = 0,
) -> t.StepCaptured:
    """One captured step (full prompt)."""
    lps = logprobs if logprobs is not None else [-0.5] * len(response)
    return t.StepCaptured(
        step_id=step_id,
        step_index=index,
        api=t.ApiKind.CHAT,
        model="tiny",
        prompt_token_ids=pack_tokens(prompt),
        response_token_ids=b"" if missing else pack_tokens(response),
        response_logprobs=b"" if missing else pack_logprobs(lps),
        policy_version=version,
        token_status=t.TokenStatus.MISSING if missing else t.TokenStatus.OK,
    )


def trajectory(
    session_id: str, steps: list[t.StepCaptured], reward: float, index: int = 0, run_id: str = "run"
) -> t.TrajectoryAssembled:
    """An assembled trajectory."""
    return t.TrajectoryAssembled(
        event_id=f"traj:{session_id}",
        session_id=session_id,
        run_id=run_id,
        task=t.Task(task_id="task"),
        rollout_index=index,
        group_size=2,
        steps=tuple(steps),
        status=t.SessionStatus.OK,
        reward=reward,
    )


def episode(
    episode_id: str,
    rewards: tuple[float, ...] = (1.0, 0.0),
    version: int = 0,
    missing: bool = False,
    run_id: str = "run",
    prompt: list[int] | None = None,
    estimator: str = "grpo",
    advantages: tuple[float, ...] | None = None,
) -> t.EpisodeAssembled:
    """An episode of len(rewards) one-step trajectories on a short prompt (advantages:
    reward minus the group mean unless given)."""
    prompt = prompt or [3, 4, 5, 6]
    trajs = []
    for i, r in enumerate(rewards):
        sid = f"{episode_id}/s{i}"
        trajs.append(
            trajectory(
                sid,
                [step(f"{sid}/0", prompt, [7 + i, 8, 9 + i], version, missing=missing and i == 1)],
                r,
                i,
                run_id,
            )
        )
    mean = sum(rewards) / len(rewards)
    return t.EpisodeAssembled(
        event_id=episode_id,
        run_id=run_id,
        task=t.Task(task_id=episode_id),
        trajectories=tuple(trajs),
        rewards=rewards,
        advantages=advantages if advantages is not None else tuple(r - mean for r in rewards),
        estimator=estimator,
        group_size=len(rewards),
        uniform_reward=len(set(rewards)) == 1,
    )


def batch(n: int = 2) -> TrainBatch:
    """``n`` GRPO episodes of two trajectories (rewards 1 and 0) as one training batch."""
    seqs: list[TrainSequence] = []
    ids = []
    for i in range(n):
        ep = episode(f"e{i}", rewards=(1.0, 0.0), prompt=[3 + i, 4, 5, 6])
        seqs += episode_sequences(ep, LossKind.GRPO)
        ids.append(ep.event_id)
    return TrainBatch(sequences=seqs, episode_ids=ids, rewards=[1.0, 0.0] * n)


def ragged_batch() -> TrainBatch:
    """Two sequences of different prompt and response lengths, the longer one with a
    masked token inside its response (for the padding of a backend's batch layout)."""
    seq = TrainSequence(
        "ep",
        "s",
        ("a", "b"),
        [1, 2, 3, 10, 11, 20, 12],
        [0, 0, 0, 1, 1, 0, 1],
        [0, 0, 0, -0.1, -0.2, 0, -0.3],
        advantage=2.0,
    )
    short = TrainSequence("ep2", "s2", ("c",), [5, 6, 9], [0, 0, 1], [0, 0, -0.5], advantage=-1.0)
    return TrainBatch([seq, short], ["ep", "ep2"])


def trainer_settings(
    tiny_model: Path, checkpoint_dir: Path, run_id: str, **more: Any
) -> TrainerSettings:
    """A trainer of run ``run_id`` on the tiny model that polls briefly (0.1 s), its
    consumer group ``<run_id>-trainer``; ``more`` sets or overrides any other field."""
    fields: dict[str, Any] = {"group_id": f"{run_id}-trainer", "poll_timeout_s": 0.1, **more}
    return TrainerSettings(
        model=str(tiny_model), checkpoint_dir=checkpoint_dir, run_id=run_id, **fields
    )
