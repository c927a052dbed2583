"""Answers by API shape, and reward functions run bounded, timed out and failure-safe."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from rllm.benchmarks import RewardResult, register_reward_fn
from rllm.processors.assemble import assemble_trajectory
from rllm.processors.score import RewardRunner, extract_answer, response_text
from rllm.schemas.convert import from_avro, to_avro
from rllm.schemas.types import ApiKind, StepCaptured, StepError, Task, TrajectoryAssembled
from tests.unit.processors.factory import make_session, task

_running = {"now": 0, "peak": 0}
_lock = threading.Lock()


@register_reward_fn("unit-slow")
def _slow(the_task: Task, answer: str) -> RewardResult:
    with _lock:
        _running["now"] += 1
        _running["peak"] = max(_running["peak"], _running["now"])
    time.sleep(0.2 if answer != "hang" else 2.0)
    with _lock:
        _running["now"] -= 1
    return RewardResult(reward=0.5, is_correct=None, signals={"len": float(len(answer))})


@register_reward_fn("unit-raise")
def _raise(the_task: Task, answer: str) -> RewardResult:
    raise RuntimeError("judge unavailable")


def _step(api: ApiKind, body: object) -> StepCaptured:
    step = make_session("s", num_steps=1)[1].payload
    assert isinstance(step, StepCaptured)
    return step.model_copy(update={"api": api, "response_json": json.dumps(body)})


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (ApiKind.CHAT, {"choices": [{"message": {"content": "42"}}]}),
        (
            ApiKind.CHAT,
            {
                "choices": [
                    {
                        "message": {
                            "content": [
                                {"type": "text", "text": "4"},
                                {"type": "text", "text": "2"},
                            ]
                        }
                    }
                ]
            },
        ),
        (ApiKind.COMPLETIONS, {"choices": [{"text": "42"}]}),
        (
            ApiKind.RESPONSES,
            {
                "output": [
                    {"type": "reasoning", "summary": []},
                    {"type": "message", "content": [{"type": "output_text", "text": "42"}]},
                ]
            },
        ),
        (
            ApiKind.ANTHROPIC_MESSAGES,
            {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "42"}]},
        ),
        (ApiKind.GENERATE, {"text": "42"}),
    ],
)
def test_response_text_by_api(api: ApiKind, body: object) -> None:
    assert response_text(_step(api, body)) == "42"


def _traj(**kw: object) -> TrajectoryAssembled:
    return assemble_trajectory(make_session("s", num_steps=2, answer="last")).model_copy(update=kw)


def test_answer_is_output_json_string_else_last_step_text() -> None:
    assert extract_answer(_traj(output_json='"from output"')) == "from output"
    assert extract_answer(_traj(output_json='{"a": 1}')) == "last"
    failed = _traj().steps[1].model_copy(update={"error": StepError(kind="gateway", message="x")})
    assert extract_answer(_traj(steps=(_traj().steps[0], failed))) == "..."
    assert extract_answer(_traj(steps=())) is None


async def _score(runner: RewardRunner, traj: TrajectoryAssembled) -> TrajectoryAssembled:
    """``RewardRunner.score_dict`` (what the processors call) on the trajectory's dict."""
    datum = to_avro(traj)
    await runner.score_dict(datum)
    scored: TrajectoryAssembled = from_avro(TrajectoryAssembled.avro_name, datum)
    return scored


async def test_runner_scores_records_failures_and_keeps_given_rewards() -> None:
    runner = RewardRunner(concurrency=2, timeout_s=0.5)
    try:
        ok = await _score(runner, _traj(task=task(answer="last")))
        assert (ok.reward, ok.is_correct, ok.evaluator) == (1.0, True, "exact_match")
        wrong = await _score(runner, _traj(task=task(answer="other")))
        assert (wrong.reward, wrong.is_correct) == (0.0, False)
        given = await _score(runner, _traj(reward=0.25, evaluator="ext"))
        assert (given.reward, given.evaluator) == (0.25, "ext")
        raised = await _score(runner, _traj(task=task(reward_fn="unit-raise")))
        assert raised.reward is None
        assert raised.reward_error == (
            "reward function 'unit-raise' raised RuntimeError: judge unavailable"
        )
        hung = await _score(runner, _traj(task=task(reward_fn="unit-slow"), output_json='"hang"'))
        assert hung.reward is None and "timed out after 0.5 s" in (hung.reward_error or "")
        unknown = await _score(runner, _traj(task=task(reward_fn="nope")))
        assert "unknown reward function 'nope'" in (unknown.reward_error or "")
    finally:
        runner.close()


async def test_runner_bounds_concurrency() -> None:
    runner = RewardRunner(concurrency=2, timeout_s=5)
    while _running["now"]:  # a timed-out call from another test may still be sleeping
        await asyncio.sleep(0.05)
    _running["peak"] = 0
    try:
        start = time.monotonic()
        out = await asyncio.gather(
            *[_score(runner, _traj(task=task(reward_fn="unit-slow"))) for _ in range(6)]
        )
        elapsed = time.monotonic() - start
    finally:
        runner.close()
    assert [t.reward for t in out] == [0.5] * 6 and out[0].reward_signals == {"len": 4.0}
    assert _running["peak"] == 2 and elapsed >= 0.55  # 3 waves of 0.2 s, never more than 2
