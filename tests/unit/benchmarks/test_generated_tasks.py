"""``rllm-cli bench gen``: generated Harbor task families, written as valid task folders,
the same for the same seed, with no held-out task among the training ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.benchmarks.harbor import HarborTaskError, check_tasks, load_dataset
from rllm.benchmarks.harbor.generate import KINDS, generate_family
from rllm.cli.main import cli


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_family_is_valid_split_and_the_same_for_the_same_seed(tmp_path: Path) -> None:
    split = generate_family("shell-basics", 28, tmp_path / "a", seed=3)
    assert (len(split.train_names), len(split.test_names)) == (21, 7)
    checks = check_tasks(split.train) + check_tasks(split.test)
    assert len(checks) == 28
    assert [(c.name, c.problems, c.warnings) for c in checks if c.problems or c.warnings] == []
    assert {name.rsplit("-", 1)[0] for name in split.train_names} == set(KINDS)
    train = {t.instruction for t in load_dataset(split.train).tasks}
    test = {t.instruction for t in load_dataset(split.test).tasks}
    assert len(train) == 21 and len(test) == 7 and not train & test
    again = generate_family("shell-basics", 28, tmp_path / "b", seed=3)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b") and again.test_names == split.test_names
    other = generate_family("shell-basics", 28, tmp_path / "c", seed=4)
    assert _tree(tmp_path / "c") != _tree(tmp_path / "a") and other.test_names == split.test_names


def test_each_instruction_names_the_command_its_solution_runs(tmp_path: Path) -> None:
    split = generate_family("shell-basics", 7, tmp_path, test_fraction=0.5)
    for folder in [*split.train.iterdir(), *split.test.iterdir()]:
        command = (folder / "solution" / "solve.sh").read_text().splitlines()[1]
        assert f"\nrun: {command}\n" in (folder / "instruction.md").read_text()
        verifier = (folder / "tests" / "test.sh").read_text()
        assert "echo 1 > /logs/verifier/reward.txt" in verifier
        assert (
            (folder / "environment" / "Dockerfile").read_text().startswith("FROM debian:bookworm\n")
        )


def test_bad_family_count_and_existing_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(HarborTaskError, match="unknown task family 'nope'; known: shell-basics"):
        generate_family("nope", 4, tmp_path)
    with pytest.raises(HarborTaskError, match="count >= 2"):
        generate_family("write-number", 1, tmp_path)
    generate_family("write-number", 4, tmp_path)
    with pytest.raises(HarborTaskError, match="train already exists"):
        generate_family("write-number", 4, tmp_path)


def test_bench_gen_writes_the_split(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", "gen", "write-number", str(tmp_path), "--count", "8"])
    assert result.exit_code == 0, result.output
    assert "write-number: 6 tasks in" in result.output and "2 held out" in result.output
    assert len(list((tmp_path / "test").iterdir())) == 2
    again = runner.invoke(cli, ["bench", "gen", "write-number", str(tmp_path)])
    assert again.exit_code == 1 and "already exists" in again.output


def test_a_large_family_has_no_repeated_task(tmp_path: Path) -> None:
    split = generate_family("shell-basics", 280, tmp_path)
    tasks = [*load_dataset(split.train).tasks, *load_dataset(split.test).tasks]
    assert len({t.instruction for t in tasks}) == 280
