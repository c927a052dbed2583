"""``mcq`` letter extraction from prose, ``f1``/``em`` normalisation, ``exact_match``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.benchmarks.graders.choice import extract_letter
from rllm.benchmarks.graders.qa import normalize_answer, token_f1
from rllm.schemas.types import Task

from .test_loaders import fixture_for


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("The answer is (B)", "B"),
        ("**C**", "C"),
        ("Answer: d", "D"),
        ("answer: (a)", "A"),
        ("Let me think. A is wrong, and so is B. The answer is C.", "C"),
        ("I think the answer is a tricky one. Answer: C", "C"),
        ("So the final answer is \\boxed{D}.", "D"),
        ("Option B is right because A is wrong.", "B"),
        ("(A) is wrong, (C) is right.", "C"),
        ("Between A and B, I pick **B**.", "B"),
        ("B", "B"),
        ("The correct choice is option E", "E"),
        ("I cannot decide.", None),
        ("Answer: Z", None),
    ],
)
def test_extract_letter(text: str, letter: str | None) -> None:
    assert extract_letter(text) == letter


def test_mcq_on_a_real_mmlu_row() -> None:
    task = load_tasks("mmlu", data_file=fixture_for("mmlu"))[0]  # gold B ("4")
    mcq = get_reward_fn("mcq")
    assert mcq(task, "The degree is 4, so the answer is (B).").is_correct is True
    assert mcq(task, "Answer: C").is_correct is False
    assert mcq(task, "Answer: 4").is_correct is True  # option text instead of its letter
    assert mcq(task, "no idea").reward == 0.0


def test_mcq_with_an_open_gold_falls_back_to_value_match(make_task: Callable[..., Task]) -> None:
    task = make_task("12", "mcq")
    assert get_reward_fn("mcq")(task, "The total is 12.\nAnswer: 12").is_correct is True
    assert get_reward_fn("mcq")(task, "Answer: 13").is_correct is False


def test_squad_normalisation_and_f1() -> None:
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert token_f1("Denver Broncos team", "the Denver Broncos") == pytest.approx(0.8)
    assert token_f1("Carolina", "Denver Broncos") == 0.0


def test_em_and_f1_take_the_best_gold() -> None:
    task = load_tasks("nq_open", data_file=fixture_for("nq_open"))[0]
    em, f1 = get_reward_fn("em"), get_reward_fn("f1")
    assert em(task, "It was in December 1972.\nAnswer: December 1972").is_correct is True
    assert em(task, "Answer: 1972").reward == 0.0
    partial = f1(task, "Answer: 1972")
    assert partial.reward == pytest.approx(2 * 1 * 0.5 / 1.5) and partial.is_correct is False
    assert f1(task, "Answer: the 14 December 1972 UTC.").signals["em"] == 1.0


def test_triviaqa_aliases_count() -> None:
    task = load_tasks("triviaqa", data_file=fixture_for("triviaqa"))[0]
    assert get_reward_fn("em")(task, "Answer: david seville").is_correct is True


def test_exact_match_still_registered(make_task: Callable[..., Task]) -> None:
    assert get_reward_fn("exact_match")(make_task("Paris"), " paris. ").is_correct is True
