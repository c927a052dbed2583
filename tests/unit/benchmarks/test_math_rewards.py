"""``math`` and ``countdown``: boxed vs plain answers, fractions vs decimals, threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.schemas.types import Task

from .test_loaders import fixture_for

CASES = [
    ("72", "Natalia sold 48 + 24 = 72 clips.\n#### 72", True),
    ("72", "So the answer is $\\boxed{72}$.", True),
    ("72", "The answer is 72 clips.", True),
    ("3600", "In total, 1,200 * 3 = \\boxed{3,600} pens.", True),
    ("\\frac{1}{2}", "The probability is 0.5", True),
    ("0.5", "\\boxed{\\frac{1}{2}}", True),
    ("\\frac{3}{4}", "so we get \\boxed{\\dfrac34}", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3, \\frac{\\pi}{2})}", True),
    ("2\\sqrt{2}", "\\boxed{\\sqrt{8}}", True),
    ("72", "\\boxed{27}", False),
    ("\\frac{1}{2}", "The answer is 0.55", False),
    ("204", "I do not know.", False),
    ("025", "\\boxed{25}", True),
]


@pytest.mark.parametrize(("gold", "answer", "ok"), CASES)
def test_math_reward(make_task: Callable[..., Task], gold: str, answer: str, ok: bool) -> None:
    result = get_reward_fn("math")(make_task(gold, "math"), answer)
    assert result.is_correct is ok and result.reward == (1.0 if ok else 0.0)


def test_math_any_of_several_golds(make_task: Callable[..., Task]) -> None:
    task = make_task(["(1,2)", "(2,1)"], "math")
    assert get_reward_fn("math")(task, "\\boxed{(2,1)}").is_correct is True
    assert get_reward_fn("math")(task, "\\boxed{(2,2)}").is_correct is False


def test_math_reward_works_off_the_main_thread(make_task: Callable[..., Task]) -> None:
    results = []
    worker = threading.Thread(
        target=lambda: results.append(
            get_reward_fn("math")(make_task("\\frac{1}{2}"), "\\boxed{0.5}").is_correct
        )
    )
    worker.start()
    worker.join()
    assert results == [True]


def test_math_on_a_real_gsm8k_row() -> None:
    task = load_tasks("gsm8k", data_file=fixture_for("gsm8k"))[0]
    assert get_reward_fn(task.reward_fn or "")(task, "48 + 24 = 72. \\boxed{72}").reward == 1.0


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("<answer>(6 - 1) * 4 + 4</answer>", False),  # uses 4 twice
        ("<answer>(6 * 4) * 1</answer>", True),
        ("Thinking... <answer>4 * 6 / 1</answer>", True),
        ("<answer>4 + 6 + 1</answer>", False),  # 11, not 24
        ("<answer>__import__('os')</answer>", False),
        ("<answer>4 * 6 / (1 - 1)</answer>", False),
    ],
)
def test_countdown(answer: str, ok: bool) -> None:
    task = load_tasks("countdown", data_file=fixture_for("countdown"))[0]
    assert get_reward_fn("countdown")(task, answer).is_correct is ok
