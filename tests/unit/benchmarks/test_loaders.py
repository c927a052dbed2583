"""Loading rows from fixture files in each dataset's real format, the package, the cache."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rllm.benchmarks import (
    DatasetRowError,
    DatasetUnavailableError,
    all_benchmarks,
    get_benchmark,
    load_tasks,
    pull,
)
from rllm.benchmarks.loaders import cache_path
from tests.paths import BENCHMARK_FIXTURES as FIXTURES

# Ground truth of the first fixture row, as the loader must derive it.
EXPECTED: dict[str, Any] = {
    "gsm8k": "72",
    "math500": "\\left( 3, \\frac{\\pi}{2} \\right)",
    "hendrycks_math": "3",
    "aime24": "204",
    "aime25": "6",
    "aime_1983_2024": "60",
    "amc": "2",
    "olympiadbench": ["4"],
    "svamp": "51",
    "gsm_hard": "33420",
    "countdown": {"target": 24, "nums": [4, 6, 1]},
    "mmlu": "B",
    "mmlu_pro": "I",
    "arc_challenge": "C",
    "hellaswag": "D",
    "winogrande": "A",
    "piqa": "A",
    "truthfulqa_mc1": "A",
    "ceval": "C",
    "cmmlu": "B",
    "medqa": "D",
    "supergpqa": "C",
    "commonsense_qa": "A",
    "openbookqa": "D",
    "nq_open": ["14 December 1972 UTC", "December 1972"],
    "triviaqa": ["David Seville", "David Seville (Ross Bagdasarian)"],
    "musique": ["Miquette Giraudy", "Miquette"],
    "squad": ["Denver Broncos"],
    "popqa": ["politician", "political leader", "political figure", "polit.", "pol"],
    "boolq": "yes",
    "hotpotqa": "yes",
    "wmt19_de_en": "The cat sleeps.",
    "chartqa": ["14"],
    "docvqa": ["0.28"],
    "mmbench": "B",
    "ai2d": "B",
    "mmmu": "B",
    "swebench_verified": "astropy__astropy-12907",
    "terminal_bench2": None,
}
SECOND_ID = {
    "aime25": "2",
    "mbpp": "12",
    "arc_challenge": "NYSEDREGENTS_2015_4_8",
    "humaneval_plus": "HumanEval/1",
    "swebench_verified": "django__django-11099",
}


def fixture_for(name: str) -> Path:
    found = [p for p in FIXTURES.glob(f"{name}.*") if p.suffix in (".jsonl", ".parquet")]
    assert len(found) == 1, f"one fixture file for {name}, found {found}"
    return found[0]


ROW_SPECS = [s for s in all_benchmarks() if not s.source.startswith(("package:", "synthetic:"))]


@pytest.mark.parametrize("spec", ROW_SPECS, ids=[s.name for s in ROW_SPECS])
def test_fixture_in_real_format_loads_into_tasks(spec: Any) -> None:
    tasks = load_tasks(spec.name, data_file=fixture_for(spec.name))
    assert len(tasks) == 2
    first = tasks[0]
    assert first.benchmark == spec.name and first.reward_fn == spec.reward_fn
    assert first.instruction.strip()
    for var in (*spec.fields, *spec.optional, "choices_text"):
        assert "{" + var + "}" not in first.instruction, var
    assert first.metadata["index"] == 0 and tasks[1].metadata["index"] == 1
    if spec.name in EXPECTED:
        assert first.ground_truth == EXPECTED[spec.name]
    if spec.name in SECOND_ID:
        assert tasks[1].task_id == SECOND_ID[spec.name]
    if spec.category.value == "vision":
        assert first.metadata["images"][0].startswith("data:image/png;base64,")
    if spec.category.value == "mcq":
        letters = "ABCDEFGHIJ"[: len(first.metadata["choices"])]
        assert first.ground_truth in letters
        assert f"{first.ground_truth}. " in first.instruction


def test_mcq_prompt_lists_lettered_choices() -> None:
    task = load_tasks("mmlu", data_file=fixture_for("mmlu"))[0]
    assert "A. 0\nB. 4\nC. 2\nD. 6" in task.instruction
    assert task.metadata["subject"] == "abstract_algebra"


def test_gpqa_shuffle_is_deterministic_and_keeps_the_correct_option() -> None:
    first = load_tasks("gpqa_diamond", data_file=fixture_for("gpqa_diamond"))[0]
    again = load_tasks("gpqa_diamond", data_file=fixture_for("gpqa_diamond"))[0]
    assert first.instruction == again.instruction
    choices = first.metadata["choices"]
    assert choices["ABCD".index(first.ground_truth)] == "10^-4 eV"
    assert sorted(choices) == sorted(["10^-4 eV", "10^-11 eV", "10^-8 eV", "10^-9 eV"])


def test_humaneval_loads_fully_offline_from_the_package() -> None:
    tasks = load_tasks("humaneval")
    assert len(tasks) == 164
    assert [t.task_id for t in tasks[:2]] == ["HumanEval/0", "HumanEval/1"]
    truth = tasks[0].ground_truth
    assert truth["kind"] == "humaneval" and truth["entry_point"] == "has_close_elements"
    assert "def has_close_elements" in tasks[0].instruction
    assert len(load_tasks("human-eval", max_examples=5)) == 5


def test_row_missing_a_mapped_field_names_row_and_field(tmp_path: Path) -> None:
    rows = [{"question": "1+1?", "answer": "#### 2"}, {"question": "2+2?"}]
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetRowError) as info:
        load_tasks("gsm8k", data_file=path)
    assert "row 1" in str(info.value) and "'answer'" in str(info.value)
    assert len(load_tasks("gsm8k", data_file=path, max_examples=1)) == 1


def test_row_with_a_bad_value_names_row_and_problem(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(DatasetRowError, match=r"gsm8k: row 0: .*####"):
        load_tasks("gsm8k", data_file=path)


def test_gzipped_jsonl_and_parquet_and_json_list_are_read(tmp_path: Path) -> None:
    rows = [{"problem": "1+1", "answer": "2"}, {"problem": "2+3", "answer": "5"}]
    gz = tmp_path / "d.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    (tmp_path / "d.json").write_text(json.dumps(rows))
    for name in ("d.jsonl.gz", "d.parquet", "d.json"):
        tasks = load_tasks("deepscaler", data_file=tmp_path / name)
        assert [t.ground_truth for t in tasks] == ["2", "5"]


def test_bad_data_files_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailableError, match="does not exist"):
        load_tasks("gsm8k", data_file=tmp_path / "missing.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DatasetUnavailableError, match="unknown format"):
        load_tasks("gsm8k", data_file=tmp_path / "x.csv")
    (tmp_path / "bad.jsonl").write_text('{"question": 1}\nnot json\n')
    with pytest.raises(DatasetUnavailableError, match=r"bad.jsonl:2"):
        load_tasks("gsm8k", data_file=tmp_path / "bad.jsonl")


def test_cached_split_is_used_without_a_download(tmp_path: Path) -> None:
    spec = get_benchmark("gsm8k")
    target = cache_path(spec, "test")
    target.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": "x #### 9"}]), target)
    assert [t.ground_truth for t in load_tasks("gsm8k")] == ["9"]


def test_pull_offline_names_the_dataset() -> None:
    with pytest.raises(DatasetUnavailableError) as info:
        pull("mmlu_pro")
    assert "'TIGER-Lab/MMLU-Pro'" in str(info.value) and "offline" in str(info.value)
    with pytest.raises(DatasetUnavailableError, match="TIGER-Lab/MMLU-Pro"):
        load_tasks("mmlu_pro")  # not cached, offline


def test_harness_benchmark_needs_a_data_file() -> None:
    with pytest.raises(DatasetUnavailableError, match="harness"):
        load_tasks("terminal_bench2")
