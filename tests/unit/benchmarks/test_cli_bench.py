"""``rllm-cli bench list|info|pull``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rllm.benchmarks import all_benchmarks
from rllm.cli.main import cli


def test_bench_list_json_and_category_filter() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) >= 60 and {"name", "hf_id", "reward_fn", "needs"} <= set(rows[0])
    code = json.loads(runner.invoke(cli, ["bench", "list", "-c", "code", "--json"]).output)
    assert {r["category"] for r in code} == {"code"}
    assert "humaneval" in {r["name"] for r in code}


def test_bench_list_table_and_bad_category() -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["bench", "list", "--category", "vision"])
    assert table.exit_code == 0 and "chartqa" in table.output and "docvqa" in table.output
    assert f"{len(all_benchmarks('vision'))} benchmarks" in table.output
    assert "gsm8k" not in table.output
    bad = runner.invoke(cli, ["bench", "list", "--category", "maths"])
    assert bad.exit_code == 2 and "'maths' is not a category" in bad.output


def test_bench_info_and_unknown_name() -> None:
    runner = CliRunner()
    info = runner.invoke(cli, ["bench", "info", "MATH-500"])
    assert info.exit_code == 0 and "HuggingFaceH4/MATH-500" in info.output
    assert "\\boxed{}" in info.output
    spec = json.loads(runner.invoke(cli, ["bench", "info", "gsm8k", "--json"]).output)
    assert spec["fields"] == {"question": "question", "answer": "answer"}
    unknown = runner.invoke(cli, ["bench", "info", "gsm8"])
    assert unknown.exit_code == 1 and "did you mean gsm8k" in unknown.output


def test_bench_pull_offline_names_the_dataset_id() -> None:
    result = CliRunner().invoke(cli, ["bench", "pull", "mmlu", "--split", "validation"])
    assert result.exit_code == 1
    assert "'cais/mmlu'" in result.output and "'validation'" in result.output
