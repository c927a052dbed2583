"""A deterministic synthetic history, as Avro-shaped event dicts, for tests, demos and perf.

Runs on a few benchmarks and models; sessions of ``steps_per_session`` steps in groups of
``group_size`` per task, each with a reward, a trajectory and (per group) an episode;
training runs publish a policy update every few groups. About 2% of steps fail and 3% of
sessions time out, so every analytics query has something to show.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

__all__ = ["T0", "synthetic_events"]

T0 = datetime(2026, 11, 1, tzinfo=UTC)
_BENCHMARKS = ("gsm8k", "math500", "humaneval")
_MODELS = ("qwen2.5-0.5b", "smollm2-135m")
_AGENTS = ("react", "codex")

Event = tuple[str, dict[str, Any]]


def _env(eid: str, sid: str, run: str, at: datetime, name: str, payload: dict[str, Any]) -> Event:
    return "rllm.events.SessionEvent", {
        "event_id": eid,
        "session_id": sid,
        "run_id": run,
        "emitted_at": at,
        "producer": "synthetic",
        "payload": (f"rllm.events.{name}", payload),
    }


def synthetic_events(
    n_steps: int,
    *,
    tokens_per_step: int = 0,
    steps_per_session: int = 5,
    group_size: int = 4,
    runs: int = 4,
    seed: int = 0,
) -> Iterator[Event]:
    """Yield events until ``n_steps`` steps were produced.

    Args:
        n_steps: steps to produce (the last session may be shorter).
        tokens_per_step: token IDs per step (4/5 prompt, 1/5 response); 0 for light steps.
        steps_per_session: steps in each session.
        group_size: sessions per task (GRPO group).
        runs: runs; odd-numbered ones are training runs with policy updates.
        seed: random seed.
    """
    rng = np.random.default_rng(seed)
    n_resp = tokens_per_step // 5
    n_prompt = tokens_per_step - n_resp
    vocab = rng.zipf(1.3, size=1 << 16).clip(0, 150_000).astype("<i4")
    steps = sessions = groups = 0
    version = {f"run-{r}": 0 for r in range(runs)}
    while steps < n_steps:
        run = f"run-{groups % runs}"
        training = (groups % runs) % 2 == 1
        bench, model = _BENCHMARKS[groups % 3], _MODELS[(groups // 3) % 2]
        task = {
            "task_id": f"{bench}/{groups // 7}",
            "instruction": "Solve it.",
            "ground_truth_json": '"42"',
            "reward_fn": "exact_match",
            "benchmark": bench,
            "metadata_json": "{}",
        }
        at = T0 + timedelta(seconds=groups * 30)
        skill = 0.3 + 0.5 * min(1.0, version[run] / 20) if training else 0.5
        group_sessions, rewards = [], []
        for g in range(group_size):
            sid = f"{run}/{task['task_id']}/{sessions}"
            group_sessions.append(sid)
            yield _env(
                f"{sid}:open",
                sid,
                run,
                at,
                "SessionOpened",
                {
                    "task": task,
                    "rollout_index": g,
                    "group_size": group_size,
                    "trajectory_name": "default",
                    "agent": _AGENTS[sessions % 2],
                    "policy_version": version[run],
                    "model": model,
                    "metadata_json": "{}",
                },
            )
            step_ids = []
            for i in range(steps_per_session):
                off = int(rng.integers(0, (1 << 16) - tokens_per_step)) if tokens_per_step else 0
                failed = rng.random() < 0.02
                lat = float(rng.lognormal(5.5, 0.5))
                step_ids.append(f"{sid}/s{i}")
                yield _env(
                    f"{sid}:s{i}",
                    sid,
                    run,
                    at + timedelta(seconds=i),
                    "StepCaptured",
                    {
                        "step_id": step_ids[-1],
                        "step_index": i,
                        "parent_step_id": step_ids[-2] if i else None,
                        "api": "chat",
                        "model": model,
                        "request_json": '{"messages": [{"role": "user", "content": "Solve it."}]}',
                        "response_json": '{"choices": [{"message": {"role": "assistant", '
                        '"content": "42"}}]}',
                        "prompt_token_ids": vocab[off : off + n_prompt].tobytes(),
                        "prompt_prefix_len": 0,
                        "response_token_ids": b""
                        if failed
                        else vocab[off + n_prompt : off + tokens_per_step].tobytes(),
                        "response_logprobs": b""
                        if failed
                        else (-rng.random(n_resp, dtype=np.float32)).tobytes(),
                        "finish_reason": None if failed else "stop",
                        "sampling_params_json": "{}",
                        "policy_version": max(0, version[run] - int(rng.integers(0, 3))),
                        "upstream": "local",
                        "started_at": at + timedelta(seconds=i),
                        "latency_ms": lat,
                        "ttft_ms": lat / 4,
                        "overhead_ms": float(rng.gamma(2, 0.4)),
                        "usage": {
                            "prompt_tokens": n_prompt or 300,
                            "completion_tokens": n_resp or 60,
                            "cached_tokens": 0,
                        },
                        "token_status": "ok" if tokens_per_step and not failed else "missing",
                        "error": {"kind": "upstream_status", "message": "502", "status_code": 502}
                        if failed
                        else None,
                    },
                )
                steps += 1
            correct = bool(rng.random() < skill)
            rewards.append(float(correct))
            yield _env(
                f"{sid}:reward",
                sid,
                run,
                at + timedelta(seconds=10),
                "RewardAssigned",
                {
                    "reward": float(correct),
                    "is_correct": correct,
                    "signals": {},
                    "evaluator": "exact_match",
                    "metadata_json": "{}",
                },
            )
            status = "timeout" if rng.random() < 0.03 else "ok"
            yield _env(
                f"{sid}:close",
                sid,
                run,
                at + timedelta(seconds=11),
                "SessionClosed",
                {
                    "status": status,
                    "output_json": '"42"',
                    "error": None,
                    "num_steps": steps_per_session,
                },
            )
            sessions += 1
        mean = float(np.mean(rewards))
        yield (
            "rllm.events.EpisodeAssembled",
            {
                "event_id": f"ep:{run}/{task['task_id']}/{groups}",
                "run_id": run,
                "task": task,
                "trajectories": [{"session_id": s} for s in group_sessions],
                "rewards": rewards,
                "advantages": [r - mean for r in rewards],
                "estimator": "grpo",
                "group_size": group_size,
                "is_partial": False,
                "uniform_reward": len(set(rewards)) == 1,
                "assembled_at": at + timedelta(seconds=12),
            },
        )
        if training and groups % (2 * runs) == (groups % runs):
            version[run] += 1
            yield (
                "rllm.events.PolicyUpdated",
                {
                    "event_id": f"pu:{run}:{version[run]}",
                    "run_id": run,
                    "version": version[run],
                    "checkpoint_uri": f"file:///ckpt/{run}/{version[run]}",
                    "base_model": model,
                    "backend": "local",
                    "metrics": {"loss": 1.0 / version[run]},
                    "num_episodes": 2,
                    "num_tokens": 1000,
                    "created_at": at + timedelta(seconds=13),
                },
            )
        groups += 1
