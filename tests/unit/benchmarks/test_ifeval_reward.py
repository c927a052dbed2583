"""``ifeval``: the checkers on real IFEval rows and kwargs (None-padded as on the Hub)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.benchmarks.graders.ifeval import follows
from rllm.benchmarks.graders.ifeval_checks import CHECKERS
from rllm.schemas.types import Task

from .test_loaders import fixture_for

ifeval = get_reward_fn("ifeval")


def test_real_row_strict_and_instruction_level() -> None:
    task = load_tasks("ifeval", data_file=fixture_for("ifeval"))[0]
    body = " ".join(["word"] * 300)
    good = f"*Early life* {body} *Career* more *Legacy* end"
    result = ifeval(task, good)
    assert result.is_correct is True and result.signals["instruction_strict"] == 1.0
    bad = f"*Early life*, {body}"  # a comma, and one highlight
    result = ifeval(task, bad)
    assert result.is_correct is False
    assert result.signals["instruction_strict"] == pytest.approx(1 / 3)
    assert result.metadata["followed"] == {
        "punctuation:no_comma": False,
        "detectable_format:number_highlighted_sections": False,
        "length_constraints:number_words": True,
    }


def test_lowercase_needs_english_and_no_capitals() -> None:
    task = load_tasks("ifeval", data_file=fixture_for("ifeval"))[1]
    assert (
        ifeval(
            task,
            "red flakes on old steel\nthe slow bloom of iron rot\nrain keeps the metal company",
        ).is_correct
        is True
    )
    assert ifeval(task, "Red flakes on old steel").is_correct is False


def test_unknown_instruction_ids_are_named() -> None:
    task = load_tasks("ifbench", data_file=fixture_for("ifbench"))[1]
    with pytest.raises(ValueError, match="count:keywords_multiple"):
        ifeval(task, "anything")
    json_task = load_tasks("ifbench", data_file=fixture_for("ifbench"))[0]
    assert ifeval(json_task, '```json\n{"a": 1}\n```').is_correct is True


@pytest.mark.parametrize(
    ("iid", "kwargs", "good", "bad"),
    [
        ("detectable_format:title", {}, "<<My Poem>>\nroses", "My Poem"),
        ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n* b", "* a\n* b\n* c"),
        (
            "detectable_format:multiple_sections",
            {"section_spliter": "SECTION", "num_sections": 2},
            "SECTION 1\nx\nSECTION 2\ny",
            "SECTION 1\nx",
        ),
        ("detectable_format:constrained_response", {}, "My answer is yes.", "Yes"),
        (
            "detectable_content:number_placeholders",
            {"num_placeholders": 2},
            "[name] at [place]",
            "[name]",
        ),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi\nP.S. bye", "Hi"),
        (
            "length_constraints:number_sentences",
            {"num_sentences": 3, "relation": "less than"},
            "One. Two.",
            "One. Two. Three. Four.",
        ),
        (
            "length_constraints:number_paragraphs",
            {"num_paragraphs": 2},
            "a\n***\nb",
            "a\n***\nb\n***\nc",
        ),
        (
            "length_constraints:nth_paragraph_first_word",
            {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
            "First.\n\nThen more.",
            "First.\n\nAfter.",
        ),
        (
            "change_case:capital_word_frequency",
            {"capital_frequency": 2, "capital_relation": "at least"},
            "THIS is VERY good",
            "This is good",
        ),
        ("keywords:existence", {"keywords": ["rust", "iron"]}, "Rust eats iron", "Rust only"),
        ("keywords:forbidden_words", {"forbidden_words": ["bad"]}, "good badge", "a bad day"),
        (
            "keywords:frequency",
            {"keyword": "cat", "frequency": 2, "relation": "at least"},
            "cat and Cat",
            "one cat",
        ),
        (
            "keywords:letter_frequency",
            {"letter": "z", "let_frequency": 2, "let_relation": "less than"},
            "zoo",
            "zizz",
        ),
        ("startend:quotation", {}, '"quoted"', "not quoted"),
        (
            "startend:end_checker",
            {"end_phrase": "Any other questions?"},
            "Done. Any other questions?",
            "Done.",
        ),
        ("combination:two_responses", {}, "first******second", "only one"),
        ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "Say hi. Hi!", "Hi!"),
        ("change_case:english_capital", {}, "THIS IS ALL IN CAPITAL LETTERS NOW", "Not All Caps"),
        (
            "language:response_language",
            {"language": "de"},
            "Das ist ein kurzer deutscher Satz über das Wetter heute.",
            "This is a short English sentence about the weather today.",
        ),
    ],
)
def test_checker(iid: str, kwargs: dict[str, Any], good: str, bad: str) -> None:
    assert follows(iid, good, kwargs) is True
    assert follows(iid, bad, kwargs) is False


def test_all_25_ifeval_ids_have_checkers() -> None:
    assert len(CHECKERS) == 25


def test_loose_accepts_markdown_wrapping(make_task: Callable[..., Task]) -> None:
    truth = {"instruction_id_list": ["startend:quotation"], "kwargs": [{}], "prompt": "p"}
    task = make_task(truth, "ifeval")
    result = ifeval(task, 'Sure:\n"quoted"')
    assert result.is_correct is False and result.signals["prompt_loose"] == 1.0
    assert json.loads(task.ground_truth_json or "")["prompt"] == "p"
