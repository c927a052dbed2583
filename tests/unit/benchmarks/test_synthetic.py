"""The synthetic multiplication benchmark and its last-number reward."""

from __future__ import annotations

import pytest

from rllm.benchmarks.loaders import load_tasks
from rllm.benchmarks.rewards import get_reward_fn
from rllm.schemas.types import Task


def test_multiply_has_every_single_digit_product_once() -> None:
    tasks = load_tasks("multiply")
    assert len(tasks) == 81
    assert len({t.task_id for t in tasks}) == 81
    by_id = {t.task_id: t for t in tasks}
    assert by_id["mul-7x8"].instruction == "What is 7 times 8?"
    assert by_id["mul-7x8"].ground_truth == "56"
    assert by_id["mul-7x8"].reward_fn == "last_number"
    assert [t.task_id for t in load_tasks("multiplication", max_examples=3)] == [
        t.task_id for t in tasks[:3]
    ]


@pytest.mark.parametrize(
    ("answer", "correct"),
    [
        ("56", True),
        ("7 times 8 is 56.", True),
        ("The answer: **56**", True),
        ("56.0", True),
        ("7 * 8 = 54", False),
        ("fifty-six", False),
        ("", False),
        ("56 or maybe 57", False),
        ("1,056", False),
    ],
)
def test_last_number_reward(answer: str, correct: bool) -> None:
    task = Task(task_id="t", ground_truth_json='"56"')
    result = get_reward_fn("last_number")(task, answer)
    assert result.is_correct is correct and result.reward == (1.0 if correct else 0.0)
