"""``rllm-cli eval DIR --agent NAME`` end to end through click: a real gateway in front of the
scripted model, the real broker, real local sandboxes, the shipped Harbor tasks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rllm.cli.main import cli
from rllm.sandboxes import SandboxSettings
from rllm.schemas.types import RewardAssigned
from tests.fakes.scripted import ScriptedUpstream
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.harnesses.helpers import Events, needs_local_sandbox
from tests.paths import HARBOR_TASKS as TASKS

pytestmark = needs_local_sandbox


@pytest.fixture
def eval_cli(
    start_gateway: Callable[..., ThreadedServer], sandbox_settings: SandboxSettings
) -> Callable[..., Result]:
    """``rllm-cli eval ARGS`` against a gateway started for the test (``--gateway-url``),
    with sandboxes in the test's own home."""
    gateway_url = start_gateway().url
    env = {"RLLM_SANDBOX_HOME": str(sandbox_settings.home), "RLLM_SANDBOX_BACKEND": "local"}

    def run(*args: str) -> Result:
        argv = ["eval", *args, "--gateway-url", gateway_url]
        return CliRunner().invoke(cli, argv, env=env, catch_exceptions=False)

    return run


def _summary(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return summary


def test_oracle_on_the_shipped_tasks_scores_every_one(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
    session_events: Events,
) -> None:
    result = eval_cli(
        str(TASKS),
        "--agent",
        "oracle",
        "--json",
        "--run-id",
        "cli-oracle",
        "--agent-timeout-multiplier",
        "2",
    )
    summary = _summary(result)
    assert (summary["tasks"], summary["attempts"], summary["errors"]) == (10, 1, 0)
    assert (summary["accuracy"], summary["mean_reward"]) == (1.0, 1.0)
    assert summary["pass_at"] == {"1": 1.0}
    assert (summary["benchmark"], summary["run_id"], summary["failures"]) == (
        "harbor_tasks",
        "cli-oracle",
        [],
    )
    assert upstream.requests == []  # the oracle calls no model
    rewards = [e.payload for _, e in session_events() if isinstance(e.payload, RewardAssigned)]
    assert sorted(r.reward for r in rewards) == [1.0] * 10  # one verifier reward per task


def test_bash_that_does_nothing_scores_zero_without_errors(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
) -> None:
    upstream.script[:] = ["done"]
    result = eval_cli(str(TASKS), "--agent", "bash", "--json", "-n", "3", "--model", "scripted")
    summary = _summary(result)
    assert (summary["tasks"], summary["accuracy"], summary["mean_reward"]) == (3, 0.0, 0.0)
    assert (summary["errors"], summary["failures"], summary["pass_at"]) == (0, [], {"1": 0.0})
    assert summary["steps"] == 3 and len(upstream.requests) == 3  # one "done" per task
    # the policy version it evaluated: the gateway's (the scripted upstream reports none)
    assert (summary["policy_version"], summary["policy_run"]) == (0, None)


def test_a_model_the_upstream_does_not_serve_is_refused_before_any_sandbox(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
    sandbox_settings: SandboxSettings,
) -> None:
    """``eval DIR --agent bash -m fake-model`` while the upstream serves ``scripted``: one
    line naming both, no sandbox, no model call, no result filed under the wrong model. The
    oracle calls no model, so it runs whatever the upstream serves."""
    result = eval_cli(str(TASKS), "--agent", "bash", "-n", "1", "--model", "fake-model")
    assert result.exit_code == 1, result.output
    err = " ".join(result.stderr.split())
    assert "model 'fake-model' is not what the gateway at" in err and "lists scripted" in err
    assert upstream.requests == []
    run = sandbox_settings.home / "run"
    assert not run.exists() or not any(run.iterdir()), "no sandbox started"
    oracle = eval_cli(str(TASKS), "--agent", "oracle", "-n", "1", "--json", "--model", "fake-model")
    assert _summary(oracle)["accuracy"] == 1.0


def test_bad_task_folders_are_named_and_the_others_are_scored(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "mixed"
    for name in ("hello-file", "csv-column-sum"):
        shutil.copytree(TASKS / name, tasks / name)
    for name in ("no-toml", "no-test", "no-reward"):
        shutil.copytree(TASKS / "hello-file", tasks / name)
    (tasks / "no-toml" / "task.toml").unlink()
    (tasks / "no-test" / "tests" / "test.sh").unlink()
    (tasks / "no-reward" / "tests" / "test.sh").write_text("#!/bin/bash\necho no reward\n")
    result = eval_cli(str(tasks), "--agent", "oracle", "--json")
    summary = _summary(result)
    assert (summary["tasks"], summary["errors"]) == (3, 3)  # no-toml and no-test never ran
    assert summary["accuracy"] == pytest.approx(2 / 3)  # no-reward ran, and failed
    errors = {f["task"]: f["error"] for f in summary["failures"]}
    assert sorted(errors) == ["no-reward", "no-test", "no-toml"]
    assert "no-toml" in errors["no-toml"] and "task.toml" in errors["no-toml"]
    assert "no-test" in errors["no-test"] and "test.sh" in errors["no-test"]
    assert errors["no-reward"].startswith("verifier_error: ") and "reward" in errors["no-reward"]
    assert "no-reward" in errors["no-reward"]

    table = eval_cli(str(tasks), "--agent", "oracle", "-n", "1")
    assert table.exit_code == 0, table.output
    assert "error no-toml: " in table.stdout and "task.toml" in table.stdout


def test_a_failed_verification_keeps_its_reason_in_the_summary_and_the_artifacts(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
    tmp_path: Path,
) -> None:
    """A 0 and a missing reward each carry tests/test.sh's exit code, the tail of its output
    and the reason, in ``--json``'s ``verifications`` and in ``verifier.json`` and
    ``test-stdout.txt`` under ``--artifacts-dir``; a solved task is in neither list."""
    tasks = tmp_path / "tasks"
    for name in ("hello-file", "wrong", "no-reward"):
        shutil.copytree(TASKS / "hello-file", tasks / name)
    (tasks / "wrong" / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nprintf 'Hello, World!\\n' > /app/hello.txt\n"
    )
    test_sh = tasks / "wrong" / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text() + "exit 3\n")
    (tasks / "no-reward" / "tests" / "test.sh").write_text(
        '#!/bin/bash\nfor i in $(seq 1 50); do echo "line $i"; done\nexit 2\n'
    )
    artifacts = tmp_path / "artifacts"
    result = eval_cli(str(tasks), "--agent", "oracle", "--json", "--artifacts-dir", str(artifacts))
    summary = _summary(result)
    assert (summary["tasks"], summary["errors"]) == (3, 1)
    assert summary["mean_reward"] == pytest.approx(1 / 3)
    tail_50 = "".join(f"line {i}\n" for i in range(11, 51))  # the last 40 lines
    by_task = {v["task"]: v for v in summary["verifications"]}
    assert sorted(by_task) == ["no-reward", "wrong"]
    assert by_task["wrong"] == {
        "task": "wrong",
        "reward": 0.0,
        "exit_code": 3,
        "error": None,
        "output_tail": "hello.txt is missing or wrong: Hello, World!\n",
    }
    missing = by_task["no-reward"]
    assert (missing["reward"], missing["exit_code"], missing["output_tail"]) == (None, 2, tail_50)
    assert "no-reward" in missing["error"] and "reward" in missing["error"]
    assert [f["task"] for f in summary["failures"]] == ["no-reward"]
    assert summary["failures"][0]["error"].startswith(f"verifier_error: {missing['error']}")

    kept = {}
    for path in artifacts.glob("*/verifier.json"):
        outcome = json.loads(path.read_text())
        task = {"hello.txt is right\n": "hello-file", tail_50: "no-reward"}.get(
            outcome["output_tail"], "wrong"
        )
        kept[task] = (outcome, (path.parent / "test-stdout.txt").read_text())
    assert sorted(kept) == ["hello-file", "no-reward", "wrong"]
    solved, solved_log = kept["hello-file"]
    assert (solved["ok"], solved["reward"], solved["exit_code"], solved["error"]) == (
        True,
        1.0,
        0,
        None,
    )
    assert solved_log == "hello.txt is right\n"
    wrong, wrong_log = kept["wrong"]
    assert (wrong["ok"], wrong["reward"], wrong["exit_code"]) == (True, 0.0, 3)
    assert wrong["error"] is None
    assert wrong_log == wrong["output_tail"] == by_task["wrong"]["output_tail"]
    failed, failed_log = kept["no-reward"]
    assert (failed["ok"], failed["reward"], failed["exit_code"]) == (False, None, 2)
    assert (failed["error"], failed["timed_out"], failed_log) == (missing["error"], False, tail_50)


def test_an_unknown_harness_is_refused_before_any_sandbox(
    eval_cli: Callable[..., Result],
    sandbox_settings: SandboxSettings,
) -> None:
    result = eval_cli(str(TASKS), "--agent", "claude-codex")
    assert result.exit_code == 1
    assert "unknown harness 'claude-codex'" in result.stderr and "oracle" in result.stderr
    assert not (sandbox_settings.home / "run").exists() or not any(
        (sandbox_settings.home / "run").iterdir()
    )


def test_an_agentic_benchmark_runs_its_tasks_dir(
    eval_cli: Callable[..., Result],
    upstream: ScriptedUpstream,
) -> None:
    result = eval_cli(
        "terminal_bench2",
        "--tasks-dir",
        str(TASKS),
        "-n",
        "2",
        "--agent",
        "harness:oracle",
        "--json",
    )
    summary = _summary(result)
    assert (summary["benchmark"], summary["tasks"], summary["accuracy"]) == (
        "terminal_bench2",
        2,
        1.0,
    )

    refused = eval_cli("gsm8k", "--tasks-dir", str(TASKS), "--agent", "oracle")
    assert refused.exit_code == 1 and "not 'gsm8k'" in refused.stderr
    no_agent = eval_cli("terminal_bench2", "--tasks-dir", str(TASKS))
    assert no_agent.exit_code == 1 and "pass --agent NAME" in no_agent.stderr
