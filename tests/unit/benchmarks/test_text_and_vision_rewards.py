"""``chrf``, the VLM graders (relaxed accuracy, ANLS, VQA accuracy, OCRBench)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.benchmarks.graders.vision import levenshtein, relaxed_match
from rllm.schemas.types import Task

from .test_loaders import fixture_for


def test_chrf_orders_translations_by_quality() -> None:
    task = load_tasks("wmt24pp", data_file=fixture_for("wmt24pp"))[1]  # "Die Katze schläft."
    chrf = get_reward_fn("chrf")
    exact, close, wrong = (
        chrf(task, a).reward
        for a in ("Die Katze schläft.", "Die Katze schlaeft.", "Der Hund bellt laut.")
    )
    assert exact == pytest.approx(1.0) and 0.3 < close < 1.0 and wrong < close
    assert chrf(task, "Die Katze schläft.").is_correct is None


@pytest.mark.parametrize(
    ("pred", "gold", "ok"),
    [
        ("14", "14", True),
        ("0.59", "0.57", True),
        ("0.61", "0.57", False),
        ("57%", "0.57", True),
        ("1,000", "1020", True),
        ("Yes", "yes", True),
        ("No", "yes", False),
    ],
)
def test_relaxed_match(pred: str, gold: str, ok: bool) -> None:
    assert relaxed_match(pred, gold) is ok


def test_relaxed_accuracy_on_chartqa_row() -> None:
    task = load_tasks("chartqa", data_file=fixture_for("chartqa"))[1]  # gold 0.57
    grader = get_reward_fn("relaxed_accuracy")
    assert grader(task, "Lamb minus corn is about 0.58.\nAnswer: 0.58").is_correct is True
    assert grader(task, "Answer: 0.7").is_correct is False


def test_anls_on_docvqa_row() -> None:
    task = load_tasks("docvqa", data_file=fixture_for("docvqa"))[1]
    anls = get_reward_fn("anls")
    assert anls(task, "Answer: University of California").reward == 1.0
    near = anls(task, "Answer: Universty of Califrnia").reward
    assert near == pytest.approx(1 - 2 / 24)
    assert anls(task, "Answer: Stanford").reward == 0.0  # under the 0.5 threshold
    assert levenshtein("kitten", "sitting") == 3


def test_vqa_accuracy_counts_annotators(make_task: Callable[..., Task]) -> None:
    task = load_tasks("textvqa", data_file=fixture_for("textvqa"))[0]
    vqa = get_reward_fn("vqa_accuracy")
    assert vqa(task, "Answer: Dakota").reward == 1.0  # 5 of 10 annotators
    assert vqa(task, "Answer: clos culombu").reward == pytest.approx(1 / 3)
    assert vqa(task, "Answer: canon").reward == 0.0


def test_ocrbench_containment_and_formula_spacing() -> None:
    rows = load_tasks("ocrbench", data_file=fixture_for("ocrbench"))
    grader = get_reward_fn("ocrbench")
    assert grader(rows[0], "The word is CENTRE.").is_correct is True
    assert grader(rows[0], "Center").is_correct is False
    assert grader(rows[1], "$x^{2}+1$").is_correct is True  # spaces ignored for HME100k


def test_vision_mcq_row_with_open_question() -> None:
    rows = load_tasks("mmmu", data_file=fixture_for("mmmu"))
    mcq = get_reward_fn("mcq")
    assert mcq(rows[0], "Company B's amount is $58,410. Answer: B").is_correct is True
    assert len(rows[1].metadata["images"]) == 2
    assert mcq(rows[1], "Answer: 12").is_correct is True
