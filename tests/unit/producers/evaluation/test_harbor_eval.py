"""Harbor task directories as an eval dataset, without services: which argument is a tasks
directory, which benchmarks take ``--tasks-dir``, the harness name, the folders that do not
load (named, paired with their own error), and a summary that lists every error."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from rllm.benchmarks.types import RewardResult
from rllm.errors import ConfigError
from rllm.producers.evaluation import EvalConfig
from rllm.producers.evaluation.harbor import (
    harness_name,
    is_tasks_dir,
    load_harbor_dataset,
    tasks_dir_of,
    unloaded_tasks,
    verifier_outcomes,
)
from rllm.producers.evaluation.summary import summarize
from rllm.producers.harnesses import UnknownHarnessError
from rllm.producers.sdk.types import RolloutOutcome
from rllm.schemas.types import SessionStatus, Task
from tests.paths import HARBOR_TASKS as TASKS

Output = dict[str, object]


def _config(benchmark: str, tasks_dir: Path | None = None) -> EvalConfig:
    return EvalConfig(
        benchmark=benchmark, gateway_url="http://127.0.0.1:1", model="m", tasks_dir=tasks_dir
    )


def test_a_directory_is_a_tasks_dir_and_a_benchmark_name_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert is_tasks_dir(str(TASKS)) and tasks_dir_of(_config(str(TASKS))) == TASKS
    assert not is_tasks_dir("gsm8k") and tasks_dir_of(_config("gsm8k")) is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gsm8k").mkdir()
    assert not is_tasks_dir("gsm8k")  # a bare name that is a benchmark stays the benchmark
    assert is_tasks_dir("./gsm8k")  # written as a path, it is the folder
    assert tasks_dir_of(_config("terminal_bench2", TASKS)) == TASKS
    with pytest.raises(ConfigError, match="not 'gsm8k'; drop --tasks-dir"):
        tasks_dir_of(_config("gsm8k", TASKS))


def test_the_harness_is_named_or_refused_clearly() -> None:
    assert harness_name("harness:oracle", None, TASKS) == "oracle"
    assert harness_name("bash", None, TASKS) == "bash"
    with pytest.raises(ConfigError, match="pass --agent NAME"):
        harness_name(None, None, TASKS)
    with pytest.raises(UnknownHarnessError, match="'claude-codex'"):
        harness_name("claude-codex", None, TASKS)


def test_folders_that_do_not_load_are_paired_with_their_own_error(tmp_path: Path) -> None:
    for name in ("a-good", "b-no-toml", "c-good", "d-no-test"):
        shutil.copytree(TASKS / "hello-file", tmp_path / name)
    (tmp_path / "b-no-toml" / "task.toml").unlink()
    (tmp_path / "d-no-test" / "tests" / "test.sh").unlink()
    dataset = load_harbor_dataset(tmp_path, agent_timeout_multiplier=3.0)
    assert [t.name for t in dataset.tasks] == ["a-good", "c-good"]
    assert dataset.tasks[0].agent_timeout_s == 3.0 * dataset.tasks[0].config.agent_timeout_s
    unloaded = dict(unloaded_tasks(dataset))
    assert sorted(unloaded) == ["b-no-toml", "d-no-test"]
    assert "'b-no-toml'" in unloaded["b-no-toml"] and "task.toml" in unloaded["b-no-toml"]
    assert "'d-no-test'" in unloaded["d-no-test"] and "tests/test.sh" in unloaded["d-no-test"]
    with pytest.raises(ConfigError, match="--verifier-timeout-multiplier must be > 0, got 0"):
        load_harbor_dataset(tmp_path, verifier_timeout_multiplier=0)


def test_the_summary_lists_every_error_and_scores_the_rest() -> None:
    def outcome(task_id: str, error: str | None) -> RolloutOutcome:
        status = SessionStatus.OK if error is None else SessionStatus.ERROR
        return RolloutOutcome(
            session_id=task_id,
            run_id="r",
            task=Task(task_id=task_id),
            rollout_index=0,
            status=status,
            answer=None,
            output=None,
            error=error,
            num_steps=0,
            seconds=1.0,
        )

    results = [
        (outcome("good", None), RewardResult(1.0, True)),
        (outcome("bad-verifier", "verifier_error: no reward file"), None),
    ]
    s = summarize("r", "dir", "m", results, 1, 2.0, unloaded=[("broken", "missing task.toml")])
    assert (s.tasks, s.errors, s.accuracy, s.mean_reward) == (2, 2, 0.5, 0.5)
    assert s.failures == [
        {"task": "broken", "error": "missing task.toml"},
        {"task": "bad-verifier", "error": "verifier_error: no reward file"},
    ]


def test_verifier_outcomes_name_why_each_attempt_fell_short() -> None:
    """Full rewards and runs whose verifier never ran are left out; a 0 and a missing
    reward keep the exit code, the error and the tail of test-stdout.txt."""

    def outcome(task_id: str, output: Output | None) -> RolloutOutcome:
        return RolloutOutcome(
            session_id=task_id,
            run_id="r",
            task=Task(task_id=task_id),
            rollout_index=0,
            status=SessionStatus.OK,
            answer=None,
            output=output,
            error=None,
            num_steps=0,
            seconds=1.0,
        )

    def ran(reward: float | None, code: int | None, error: str | None, tail: str) -> Output:
        return {
            "reward": reward,
            "verifier_exit_code": code,
            "verifier_error": error,
            "verifier_output_tail": tail,
        }

    results = [
        (outcome("solved", ran(1.0, 0, None, "1 passed\n")), RewardResult(1.0, True)),
        (outcome("wrong", ran(0.0, 1, None, "expected 56, got 65\n")), RewardResult(0.0, False)),
        (outcome("half", ran(0.5, 0, None, "1 of 2\n")), RewardResult(0.5, False)),
        (outcome("no-file", ran(None, 0, "no reward file", "done\n")), None),
        (outcome("timed-out", ran(None, None, "timed out after 5 s", "")), None),
        (outcome("agent-died", ran(None, None, None, "")), None),  # the verifier never ran
        (outcome("not-harbor", None), None),
    ]
    assert verifier_outcomes(results) == [
        {
            "task": "wrong",
            "reward": 0.0,
            "exit_code": 1,
            "error": None,
            "output_tail": "expected 56, got 65\n",
        },
        {"task": "half", "reward": 0.5, "exit_code": 0, "error": None, "output_tail": "1 of 2\n"},
        {
            "task": "no-file",
            "reward": None,
            "exit_code": 0,
            "error": "no reward file",
            "output_tail": "done\n",
        },
        {
            "task": "timed-out",
            "reward": None,
            "exit_code": None,
            "error": "timed out after 5 s",
            "output_tail": "",
        },
    ]


def test_the_plain_summary_and_table_say_why_verifiers_fell_short(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--json`` is not the only place a 0 carries its reason: the text summary shows the
    first five (then a count), the CLI table all of them, and each substituted image."""
    from rllm.cli.eval import _table

    verifications = [
        {
            "task": "wrong",
            "reward": 0.0,
            "exit_code": 1,
            "error": None,
            "output_tail": "collected 2 items\nFAILED test_out - expected 56, got 65\n\n",
        },
        {
            "task": "no-file",
            "reward": None,
            "exit_code": 0,
            "error": "no reward file",
            "output_tail": "done\n",
        },
        *[
            {"task": f"t{i}", "reward": 0.0, "exit_code": 2, "error": None, "output_tail": ""}
            for i in range(4)
        ],
    ]
    base = summarize("r", "tasks", "m", [], attempts=1, seconds=1.0)
    summary = dataclasses.replace(
        base,
        verifications=verifications,
        substituted_images={"ubuntu:24.04": "debian:trixie"},
    )
    notes = [
        "image ubuntu:24.04 ran as debian:trixie",
        "verifier wrong: reward 0 · exit 1 · FAILED test_out - expected 56, got 65",
        "verifier no-file: no reward · exit 0 · no reward file",
        *[f"verifier t{i}: reward 0 · exit 2 · no output" for i in range(4)],
    ]
    assert str(summary).splitlines()[4:] == [
        *[f"  {line}" for line in notes[:6]],
        "  ... and 1 more verification",
    ]
    _table(summary)
    assert capsys.readouterr().out.splitlines()[-7:] == notes


def test_rows_of_an_agentic_benchmark_point_at_tasks_dir_before_the_stack(
    tmp_path: Path,
) -> None:
    import asyncio

    from rllm.producers.evaluation import run_eval

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"task_id": "a", "instruction": "make hello.txt"}\n')
    config = EvalConfig(
        benchmark="terminal_bench2", gateway_url="http://127.0.0.1:1", model="m", data_file=rows
    )
    # no gateway listens on port 1: the bad input is named first, not the missing stack
    with pytest.raises(
        ConfigError, match=r"rows carry no environment or verifier: pass --tasks-dir"
    ):
        asyncio.run(run_eval(config))
