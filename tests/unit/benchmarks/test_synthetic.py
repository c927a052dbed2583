"""The synthetic multiplication benchmark and its last-number reward."""

from __future__ import annotations

import json

import pytest

from rllm.benchmarks.errors import DatasetUnavailableError
from rllm.benchmarks.loaders import load_tasks
from rllm.benchmarks.rewards import get_reward_fn
from rllm.errors import ConfigError
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


def test_multiply_splits_hold_out_20_tasks_disjoint_from_the_61_trained_on() -> None:
    every = [t.task_id for t in load_tasks("multiply")]
    train = [t.task_id for t in load_tasks("multiply", split="train")]
    test = [t.task_id for t in load_tasks("multiply", split="test")]
    assert (len(train), len(test)) == (61, 20)
    assert not set(train) & set(test)
    assert test == every[:20] and train == every[20:]  # the fixed order, cut once
    assert test[:3] == ["mul-3x7", "mul-6x4", "mul-3x9"]
    assert {json.loads(t.metadata_json)["split"] for t in load_tasks("multiply", split="test")} == {
        "test"
    }


def test_multiply_names_its_splits_for_an_unknown_one() -> None:
    with pytest.raises(
        DatasetUnavailableError, match=r"no split 'validation'; its splits: all, train, test"
    ):
        load_tasks("multiply", split="validation")


def test_held_out_split_refuses_more_than_the_test_split() -> None:
    from rllm.app.demo import held_out_split

    train, test = held_out_split(5)
    assert len(train) == 61 and [t.task_id for t in test] == [
        "mul-3x7",
        "mul-6x4",
        "mul-3x9",
        "mul-9x4",
        "mul-2x1",
    ]
    with pytest.raises(ConfigError, match="held_out 21 is more than the 20 tasks"):
        held_out_split(21)
