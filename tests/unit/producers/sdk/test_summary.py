"""pass@k, reward normalisation and eval summaries against hand-computed values."""

from __future__ import annotations

import pytest

from rllm.benchmarks.types import RewardResult
from rllm.producers.evaluation.summary import pass_at_k, summarize
from rllm.producers.sdk.evaluator import to_reward_result
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionStatus, Task


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),
        (5, 2, 2, 0.7),
        (4, 0, 4, 0.0),
        (4, 1, 4, 1.0),
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_matches_hand_computed_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_refuses_too_few_samples() -> None:
    with pytest.raises(ValueError, match="pass@3 needs at least 3 samples, got 2"):
        pass_at_k(2, 1, 3)


@pytest.mark.parametrize(
    ("value", "reward", "correct"),
    [
        (0.5, 0.5, None),
        (True, 1.0, True),
        (False, 0.0, False),
        ((0.25, True), 0.25, True),
        ({"reward": 2, "is_correct": False}, 2.0, False),
        (RewardResult(reward=0.1, is_correct=True), 0.1, True),
    ],
)
def test_scorer_results_are_normalised(value: object, reward: float, correct: bool | None) -> None:
    result = to_reward_result(value)
    assert (result.reward, result.is_correct) == (reward, correct)


def test_a_scorer_returning_nonsense_is_named() -> None:
    with pytest.raises(TypeError, match="got 'yes'"):
        to_reward_result("yes")


def _outcome(task_id: str, index: int, ok: bool = True, seconds: float = 1.0) -> RolloutOutcome:
    return RolloutOutcome(
        session_id=f"{task_id}/{index}",
        run_id="r",
        task=Task(task_id=task_id),
        rollout_index=index,
        status=SessionStatus.OK if ok else SessionStatus.ERROR,
        answer="x",
        output="x",
        error=None if ok else "boom",
        num_steps=2,
        seconds=seconds,
        prompt_tokens=10,
        completion_tokens=5,
    )


def test_summary_counts_accuracy_pass_at_k_tokens_and_errors() -> None:
    right, wrong = RewardResult(1.0, True), RewardResult(0.0, False)
    results = [
        (_outcome("a", 0), right),
        (_outcome("a", 1), wrong),
        (_outcome("b", 0), wrong),
        (_outcome("b", 1, ok=False, seconds=3.0), None),
    ]
    s = summarize("r", "bench", "m", results, attempts=2, seconds=7.0)
    assert (s.tasks, s.attempts, s.errors) == (2, 2, 1)
    assert s.accuracy == pytest.approx(0.25)
    assert s.mean_reward == pytest.approx(0.25)
    assert s.pass_at == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
    assert (s.prompt_tokens, s.completion_tokens, s.steps) == (40, 20, 8)
    assert s.latency_p50_s == pytest.approx(1.0)
