"""The registry: size, coverage, names and aliases, and that every entry is wired up."""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter

import pytest

from rllm.benchmarks import (
    BenchmarkError,
    Category,
    Need,
    RewardResult,
    UnknownBenchmarkError,
    all_benchmarks,
    get_benchmark,
    get_reward_fn,
    register_reward_fn,
    reward_fn_names,
)
from rllm.benchmarks.adapters import ADAPTERS
from rllm.benchmarks.errors import GradingError, NameTakenError, UnknownRewardFnError
from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.schemas.types import Task

REQUIRED = [
    "gsm8k",
    "math500",
    "aime24",
    "aime25",
    "amc",
    "hmmt25",
    "olympiadbench",
    "minerva_math",
    "deepscaler",
    "countdown",
    "humaneval",
    "mbpp",
    "livecodebench",
    "mmlu",
    "mmlu_pro",
    "mmlu_redux",
    "gpqa_diamond",
    "supergpqa",
    "ceval",
    "arc_challenge",
    "hotpotqa",
    "nq_open",
    "triviaqa",
    "musique",
    "hle",
    "ifeval",
    "ifbench",
    "wmt24pp",
    "flores",
    "browsecomp_plus",
    "sealqa",
    "mmmu",
    "mathvista",
    "ai2d",
    "docvqa",
    "chartqa",
    "ocrbench",
    "bfcl",
    "terminal_bench2",
    "swebench_verified",
    "skillsbench",
]


def test_registry_has_at_least_60_entries_across_every_category() -> None:
    specs = all_benchmarks()
    assert len(specs) >= 60
    counts = Counter(s.category for s in specs)
    assert set(counts) == set(Category)
    assert counts[Category.MATH] >= 10 and counts[Category.MCQ] >= 10


@pytest.mark.parametrize("name", REQUIRED)
def test_required_benchmark_is_registered(name: str) -> None:
    assert get_benchmark(name).name == name


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("MATH-500", "math500"),
        ("AIME 2024", "aime24"),
        ("aime_2025", "aime25"),
        ("GPQA", "gpqa_diamond"),
        ("Terminal-Bench-2.0", "terminal_bench2"),
        ("nq", "nq_open"),
        ("HumanEval", "humaneval"),
        ("lcb", "livecodebench"),
        ("SWE-bench", "swebench_verified"),
    ],
)
def test_aliases_and_spelling_variants_resolve(alias: str, name: str) -> None:
    assert get_benchmark(alias).name == name


def test_unknown_benchmark_lists_close_names() -> None:
    with pytest.raises(UnknownBenchmarkError) as info:
        get_benchmark("gsm8")
    message = str(info.value)
    assert "'gsm8'" in message and "gsm8k" in message
    with pytest.raises(KeyError):  # also a KeyError for stdlib callers
        get_benchmark("mmlu-prp")


def test_every_entry_is_wired_to_a_registered_grader_and_adapter() -> None:
    graders = set(reward_fn_names())
    for spec in all_benchmarks():
        assert spec.reward_fn in graders, spec.name
        assert spec.adapter is None or spec.adapter in ADAPTERS, spec.name
        assert spec.agent in ("chat", "code", "vlm", "search") or spec.agent.startswith(
            "harness:"
        ), spec.name
        if spec.category is Category.VISION:
            assert Need.VISION in spec.needs
        if spec.agent.startswith("harness:"):
            assert Need.HARNESS in spec.needs
        assert spec.hf_id or spec.source != "hub", spec.name


def test_a_kind_variant_and_meta_build_the_entry_spelled_out_in_full() -> None:
    base = benchmark_kind(Category.QA, reward_fn="f1", split="validation")
    judged = base.variant(reward_fn="llm_judge", needs=frozenset({Need.JUDGE}))
    spec = judged(
        "x",
        "X",
        "org/x",
        {"question": "q", "answer": "a"},
        optional={"hint": "h"},
        metadata=("hint",),
        meta=("level", "type"),
        split="test",
    )
    assert spec.reward_fn == "llm_judge" and spec.needs == {Need.JUDGE}
    assert spec.split == "test" and spec.hf_id == "org/x"
    assert list(spec.optional.items()) == [("hint", "h"), ("level", "level"), ("type", "type")]
    assert spec.metadata == ("hint", "level", "type")
    assert base("y", "Y").reward_fn == "f1" and base("y", "Y").needs == frozenset()


def test_categories_filter() -> None:
    code = all_benchmarks("code")
    assert code and {s.category for s in code} == {Category.CODE}
    assert [s.name for s in code] == sorted(s.name for s in code)


def _modules() -> list[str]:
    import rllm.benchmarks
    import rllm.models

    names = ["rllm.benchmarks", "rllm.models", "rllm.cli.bench", "rllm.cli.model"]
    for package in (rllm.benchmarks, rllm.models):
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return names


@pytest.mark.parametrize("module", _modules())
def test_every_exported_name_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    assert hasattr(mod, "__all__"), module
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_registry_errors_are_benchmark_errors_naming_the_value() -> None:
    get_benchmark("gsm8k")  # the catalog is loaded
    clash = benchmark_kind(Category.MATH)("unit_clash", "Clash", "org/x", aliases=("GSM-8K",))
    with pytest.raises(NameTakenError, match="'GSM-8K' of 'unit_clash' is taken by 'gsm8k'"):
        register_benchmarks(clash)
    with pytest.raises(KeyError):  # UnknownBenchmarkError is one too, for stdlib callers
        get_benchmark("unit_clash")
    with pytest.raises(NameTakenError, match="'exact_match' is already registered"):
        register_reward_fn("exact_match")(lambda task, answer: RewardResult(0.0))
    with pytest.raises(UnknownRewardFnError) as unknown:
        get_reward_fn("exact_matsh")
    assert isinstance(unknown.value, KeyError) and isinstance(unknown.value, BenchmarkError)
    assert str(unknown.value).startswith("unknown reward function 'exact_matsh'; did you mean")


@pytest.mark.parametrize("reward_fn", ["exact_match", "last_number", "math", "mcq", "em"])
def test_a_task_without_ground_truth_is_a_grading_error(reward_fn: str) -> None:
    task = Task(task_id="t9", instruction="q", reward_fn=reward_fn, benchmark="unit")
    with pytest.raises(GradingError, match="task 't9' has no ground truth"):
        get_reward_fn(reward_fn)(task, "Answer: 4")
