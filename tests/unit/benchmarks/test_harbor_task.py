"""Harbor task folders: parsing ``task.toml``, required files, the dataset rows, ``bench
check``, and the reward-file rules of the verifier (on a recording sandbox double; the
real sandboxes run it in ``tests/integration/sandboxes/test_harbor_verifier.py``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rllm.benchmarks.errors import RewardFileError
from rllm.benchmarks.harbor import (
    HarborNetworkMode,
    HarborTaskError,
    check_tasks,
    from_task,
    load_dataset,
    load_task,
    parse_size_mb,
    run_oracle,
    run_verifier,
)
from rllm.benchmarks.harbor.check import check_task
from rllm.benchmarks.harbor.rewards import parse_reward_json, parse_reward_txt
from rllm.benchmarks.harbor.verifier import output_tail
from rllm.cli.main import cli
from rllm.errors import ConfigError
from rllm.sandboxes.types import ExecResult, NetworkMode
from tests.paths import HARBOR_TASKS as TASKS

MINIMAL_TOML = """version = "1.0"
[metadata]
category = "files"
[agent]
timeout_sec = 100.0
[verifier]
timeout_sec = 20.0
"""


def make_task(
    root: Path,
    name: str = "t",
    *,
    toml: str | None = MINIMAL_TOML,
    instruction: str | None = "Do it.\n",
    dockerfile: str | None = "FROM debian:bookworm\nWORKDIR /app\n",
    test_sh: str | None = "echo 1 > /logs/verifier/reward.txt\n",
    solve_sh: str | None = "true\n",
) -> Path:
    """A task folder with the given files (None leaves one out)."""
    path = root / name
    path.mkdir(parents=True)
    for rel, text in (
        ("task.toml", toml),
        ("instruction.md", instruction),
        ("environment/Dockerfile", dockerfile),
        ("tests/test.sh", test_sh),
        ("solution/solve.sh", solve_sh),
    ):
        if text is not None:
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
    return path


# --- the shipped tasks ------------------------------------------------------------------


def test_shipped_tasks_load_with_oracles_and_cover_the_categories() -> None:
    dataset = load_dataset(TASKS)
    assert dataset.errors == ()
    assert len(dataset.tasks) >= 8
    assert all(task.solution_dir is not None and task.warnings == () for task in dataset.tasks)
    categories = {task.metadata["category"] for task in dataset.tasks}
    assert {"files", "debugging", "data-processing", "security"} <= categories
    for task in dataset.tasks:
        assert task.dockerfile is not None
        assert task.dockerfile.read_text().startswith(("FROM debian:bookworm", "# "))


def test_shipped_task_fields() -> None:
    hello = load_task(TASKS / "hello-file")
    assert (hello.name, hello.workdir, hello.agent_timeout_s, hello.verifier_timeout_s) == (
        "hello-file",
        "/app",
        120.0,
        30.0,
    )
    config = hello.config
    assert (config.cpus, config.memory_mb, config.storage_mb, config.build_timeout_s) == (
        1.0,
        512,
        1024,
        300.0,
    )
    assert config.network_mode is None and hello.network is NetworkMode.HOST  # public, as in Harbor
    assert hello.instruction.startswith("Create the file `/app/hello.txt`")
    assert load_task(TASKS / "make-executable").config.memory_mb == 512  # memory = "512M"
    assert load_task(TASKS / "csv-column-sum").config.storage_mb == 1024  # storage = "1G"
    edit = load_task(TASKS / "edit-config")  # WORKDIR after COPY, not /app
    assert edit.workdir == "/srv/service"
    assert edit.config.verifier_env == {"EXPECTED_DIR": "/srv/service"}
    offline = load_task(TASKS / "no-network")
    assert offline.config.network_mode is HarborNetworkMode.NO_NETWORK
    assert offline.network is NetworkMode.NONE
    spec = offline.sandbox_spec("harbor/no-network", labels={"rllm.owner": "me"})
    assert (spec.image, spec.workdir, spec.network, spec.labels) == (
        "harbor/no-network",
        "/app",
        NetworkMode.NONE,
        {"rllm.owner": "me"},
    )
    assert (spec.cpus, spec.memory_mb, spec.disk_mb) == (1.0, 512, 10240)
    bare = edit.sandbox_spec("img", limits=False, network=NetworkMode.HOST)
    assert (bare.cpus, bare.memory_mb, bare.disk_mb, bare.network) == (
        None,
        None,
        None,
        NetworkMode.HOST,
    )


def test_timeout_multipliers_scale_the_task_timeouts() -> None:
    task = load_task(
        TASKS / "hello-file", agent_timeout_multiplier=2.5, verifier_timeout_multiplier=0.5
    )
    assert (task.agent_timeout_s, task.verifier_timeout_s) == (300.0, 15.0)
    assert task.config.agent_timeout_s == 120.0
    with pytest.raises(ConfigError, match="multiplier 0"):
        load_task(TASKS / "hello-file", agent_timeout_multiplier=0)


# --- task.toml --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("2G", 2048),
        ("512M", 512),
        ("1.5g", 1536),
        ("2048K", 2),
        ("4GB", 4096),
        ("1GiB", 1024),
        ("1T", 1048576),
    ],
)
def test_size_strings(text: str, mb: int) -> None:
    assert parse_size_mb(text) == mb


@pytest.mark.parametrize("text", ["2", "lots", "-1G", "1X", ""])
def test_bad_size_strings(text: str) -> None:
    with pytest.raises(ValueError, match="is not like '2G'"):
        parse_size_mb(text)


def test_bad_sizes_and_reward_files_raise_the_benchmark_errors() -> None:
    with pytest.raises(HarborTaskError, match="size '1X'"):
        parse_size_mb("1X")
    with pytest.raises(RewardFileError, match=r"reward\.txt is not a number: 'yes'"):
        parse_reward_txt("yes")
    with pytest.raises(RewardFileError, match=r"reward\.json must be a JSON object"):
        parse_reward_json("[1]")


def test_defaults_are_harbors(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path, toml='version = "1.0"\n', dockerfile="FROM debian:12\n"))
    config = task.config
    assert (config.agent_timeout_s, config.verifier_timeout_s, config.build_timeout_s) == (
        600.0,
        600.0,
        600.0,
    )
    assert (config.cpus, config.memory_mb, config.storage_mb) == (1.0, 2048, 10240)
    assert task.workdir == "/"  # no WORKDIR in the Dockerfile: Docker's default


def test_every_bad_field_is_reported_at_once(tmp_path: Path) -> None:
    toml = """version = "1.0"
[agent]
timeout_sec = "fast"
[verifier]
timeout_sec = -1
env = { A = 1 }
[environment]
cpus = true
memory_mb = 1.5
network_mode = "internet"
workdir = "app"
"""
    with pytest.raises(HarborTaskError) as caught:
        load_task(make_task(tmp_path, "bad-types", toml=toml))
    message = str(caught.value)
    assert "'bad-types'" in message
    for part in (
        "[agent] timeout_sec must be a positive number, got 'fast'",
        "[verifier] timeout_sec must be a positive number, got -1",
        "[verifier] env must be a table of strings",
        "[environment] cpus must be a positive number, got True",
        "[environment] memory_mb must be a positive integer, got 1.5",
        "network_mode must be one of 'public', 'no-network', 'allowlist', got 'internet'",
        "[environment] workdir must be an absolute path, got 'app'",
    ):
        assert part in message


def test_network_modes_and_the_older_allow_internet(tmp_path: Path) -> None:
    env = "[environment]\n"
    unsaid = load_task(make_task(tmp_path, "default", toml=env))
    assert unsaid.config.network_mode is None and unsaid.network is NetworkMode.HOST  # public
    denied = load_task(make_task(tmp_path, "denied", toml=env + "allow_internet = false\n"))
    assert denied.network is NetworkMode.NONE
    public = load_task(make_task(tmp_path, "a", toml=env + 'network_mode = "public"\n'))
    assert public.network is NetworkMode.HOST
    closed = load_task(make_task(tmp_path, "b", toml=env + "allow_internet = false\n"))
    assert closed.config.network_mode is HarborNetworkMode.NO_NETWORK
    listed = load_task(make_task(tmp_path, "c", toml=env + 'allowed_hosts = ["pypi.org"]\n'))
    assert listed.config.network_mode is HarborNetworkMode.ALLOWLIST
    assert listed.network is NetworkMode.NONE and "allowlist" in " ".join(listed.warnings)
    verifier_only = "[verifier]\nnetwork_mode = 'public'\n[environment]\nallow_internet = false\n"
    assert load_task(make_task(tmp_path, "d", toml=verifier_only)).network is NetworkMode.HOST


def test_unknown_keys_are_kept_with_a_warning(tmp_path: Path) -> None:
    toml = MINIMAL_TOML + '[environment]\ngpus = 2\nfancy = "yes"\n[custom]\nx = 1\n'
    task = load_task(make_task(tmp_path, toml=toml))
    assert task.config.extra == {"environment.fancy": "yes", "custom": {"x": 1}}
    warnings = " | ".join(task.warnings)
    assert "unknown key environment.fancy" in warnings and "unknown key custom" in warnings
    assert "environment.gpus = 2 is not supported" in warnings


def test_task_section_name_canary_and_schema_version(tmp_path: Path) -> None:
    toml = 'schema_version = "1.1"\n[task]\nname = "org/renamed"\ndescription = "d"\n'
    text = "<!-- harbor-canary GUID 1234 -->\n# BENCHMARK DATA canary string\n\nReal text.\n"
    task = load_task(make_task(tmp_path, toml=toml, instruction=text))
    assert (task.name, task.config.schema_version, task.instruction) == (
        "org/renamed",
        "1.1",
        "Real text.\n",
    )


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("task.toml", "missing task.toml"),
        ("instruction.md", "missing instruction.md"),
        ("tests/test.sh", "missing tests/test.sh"),
        ("environment/Dockerfile", "missing environment/Dockerfile"),
    ],
)
def test_missing_required_file_names_task_and_file(
    tmp_path: Path, missing: str, named: str
) -> None:
    path = make_task(tmp_path, "lacking")
    (path / missing).unlink()
    with pytest.raises(HarborTaskError, match="'lacking'") as caught:
        load_task(path)
    assert named in str(caught.value) and str(path / missing) in str(caught.value)


def test_docker_image_needs_no_dockerfile_and_no_solution_is_a_warning(tmp_path: Path) -> None:
    toml = '[environment]\ndocker_image = "debian:bookworm"\nworkdir = "/work"\n'
    task = load_task(make_task(tmp_path, toml=toml, dockerfile=None, solve_sh=None))
    assert task.dockerfile is None and task.config.docker_image == "debian:bookworm"
    assert task.workdir == "/work" and task.solution_dir is None
    assert task.warnings == ("no solution/solve.sh: no oracle proves this task solvable",)


def test_invalid_toml_and_empty_instruction(tmp_path: Path) -> None:
    with pytest.raises(HarborTaskError, match=r"task\.toml is not valid TOML"):
        load_task(make_task(tmp_path, "a", toml="version = \n"))
    with pytest.raises(HarborTaskError, match=r"instruction\.md is empty"):
        load_task(make_task(tmp_path, "b", instruction="\n  \n"))


# --- the dataset ------------------------------------------------------------------------


def test_dataset_rows_carry_the_harbor_settings() -> None:
    dataset = load_dataset(TASKS, agent_timeout_multiplier=2.0)
    rows = {row.task_id: row for row in dataset.rows()}
    assert set(rows) == {task.name for task in dataset.tasks}
    row = rows["edit-config"]
    assert row.benchmark == "harbor_tasks" and row.reward_fn is None
    assert row.instruction.startswith("The service's settings are in `app.conf`")
    harbor = row.metadata["harbor"]
    assert harbor["path"] == str(TASKS / "edit-config")
    assert (harbor["workdir"], harbor["agent_timeout_s"], harbor["verifier_timeout_s"]) == (
        "/srv/service",
        240.0,
        30.0,
    )
    assert row.metadata["task_metadata"]["category"] == "configuration"
    back = from_task(row)
    assert (back.name, back.agent_timeout_s, back.workdir) == ("edit-config", 240.0, "/srv/service")
    with pytest.raises(HarborTaskError, match="not a Harbor task"):
        from_task(row.model_copy(update={"metadata_json": "{}"}))


def test_one_bad_task_does_not_stop_the_others(tmp_path: Path) -> None:
    shutil.copytree(TASKS / "hello-file", tmp_path / "hello-file")
    make_task(tmp_path, "no-tests", test_sh=None)
    (tmp_path / ".git").mkdir()
    dataset = load_dataset(tmp_path, name="mine")
    assert [t.name for t in dataset.tasks] == ["hello-file"] and dataset.name == "mine"
    assert len(dataset.errors) == 1 and "'no-tests'" in str(dataset.errors[0])
    assert "missing tests/test.sh" in str(dataset.errors[0])
    assert dataset.get("hello-file").name == "hello-file"
    with pytest.raises(HarborTaskError, match=r"no Harbor task 'nope'.*tasks: hello-file"):
        dataset.get("nope")
    with pytest.raises(HarborTaskError, match="does not exist"):
        load_dataset(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarborTaskError, match="no Harbor task folders"):
        load_dataset(tmp_path / "empty")
    assert [t.name for t in load_dataset(tmp_path / "hello-file").tasks] == ["hello-file"]


# --- bench check ------------------------------------------------------------------------


TWO_STAGES = (
    "ARG BASE=debian:bookworm\nFROM $BASE AS build\nRUN <<EOF\necho hi > /out\nEOF\n"
    "FROM python:3.11-slim\nCOPY --from=build /out /out\n"
)
MANY_PROBLEMS = (
    "FROM ubuntu:24.04 AS build\nRUN python3 << 'PY'\nimport sys\nPY\nFROBNICATE\n"
    "FROM build\nCOPY --from=ghcr.io/astral-sh/uv:0.8 /uv /bin/\nCOPY onlyone\n"
)


def bad_tasks(root: Path) -> Path:
    shutil.copytree(TASKS / "hello-file", root / "good")
    make_task(root, "no-tests", test_sh=None)
    make_task(root, "from-ubuntu", dockerfile="FROM ubuntu:22.04\nWORKDIR /app\n")
    make_task(root, "arg-base", dockerfile="ARG BASE=debian:bookworm\nFROM ${BASE}\n")
    make_task(root, "two-stages", dockerfile=TWO_STAGES)
    make_task(root, "many-problems", dockerfile=MANY_PROBLEMS)
    make_task(root, "empty-test", test_sh="")
    make_task(root, "bad-mode", toml='[environment]\nnetwork_mode = "offline"\n')
    make_task(root, "silent-test", test_sh="#!/bin/bash\nexit 0\n")
    make_task(root, "python", dockerfile="FROM python:3.11-slim\nWORKDIR /app\n")
    make_task(root, "python-3.99", dockerfile="FROM python:3.99-slim\n")
    return root


def test_check_reports_each_task_and_keeps_going(tmp_path: Path) -> None:
    checks = {c.name: c for c in check_tasks(bad_tasks(tmp_path))}
    assert len(checks) == 11
    assert checks["python"].ok
    assert "(asked for 3.99)" in checks["python-3.99"].problems[0]  # no pyenv 3.99 here
    assert checks["good"].ok and checks["good"].warnings == ()
    assert checks["arg-base"].ok  # FROM through an ARG default
    assert not checks["no-tests"].ok and "missing tests/test.sh" in checks["no-tests"].problems[0]
    assert (
        "FROM at line 1 names 'ubuntu:22.04', not an image that builds here"
        in checks["from-ubuntu"].problems[0]
    )
    assert checks["two-stages"].ok, checks["two-stages"].problems
    many = checks["many-problems"].problems
    assert len(many) == 2 and "has a space after <<" in many[0]
    assert "Dockerfile:2: << 'PY'" in many[0] and "Dockerfile:5" in many[1]  # parse: all
    fixed = MANY_PROBLEMS.replace("<< 'PY'", "<<'PY'").replace("FROBNICATE\n", "")
    (tmp_path / "many-problems" / "environment" / "Dockerfile").write_text(fixed)
    many = check_tasks(tmp_path / "many-problems")[0].problems
    assert [p.split(" names ")[0].split(": ")[-1] for p in many] == [
        "FROM at line 1",
        "COPY --from at line 6",
        "COPY needs a source and a destination",
    ]
    assert "tests/test.sh is empty" in checks["empty-test"].problems[0]
    assert "got 'offline'" in checks["bad-mode"].problems[0]
    assert checks["silent-test"].ok and "mentions reward.txt" in checks["silent-test"].warnings[0]
    assert all(c.ok for c in check_tasks(TASKS))


def test_cli_bench_check(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(cli, ["bench", "check", str(TASKS)])
    assert good.exit_code == 0, good.output
    assert "0 invalid" in good.output and "no-network" in good.output
    report = json.loads(runner.invoke(cli, ["bench", "check", str(TASKS), "--json"]).output)
    assert report["tasks"] == report["valid"] >= 8 and report["invalid"] == 0
    bad = runner.invoke(cli, ["bench", "check", str(bad_tasks(tmp_path / "bad")), "--json"])
    assert bad.exit_code == 1
    report = json.loads(bad.output)
    assert (report["tasks"], report["invalid"]) == (11, 6)
    rows = {c["name"]: c for c in report["checks"]}
    assert (
        rows["bad-mode"]["ok"] is False
        and "[environment] network_mode" in rows["bad-mode"]["problems"][0]
    )
    table = runner.invoke(cli, ["bench", "check", str(tmp_path / "bad")])
    assert table.exit_code == 1 and "[environment] network_mode" in table.output
    missing = runner.invoke(cli, ["bench", "check", str(tmp_path / "absent")])
    assert missing.exit_code == 1 and "does not exist" in missing.output


# --- reward files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"), [("1", 1.0), ("0\n", 0.0), (" 0.25 \n", 0.25), ("-1e-3", -0.001)]
)
def test_reward_txt(text: str, value: float) -> None:
    assert parse_reward_txt(text) == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is empty"),
        ("\n", "is empty"),
        ("abc", "is not a number: 'abc'"),
        ("nan", "not a finite number"),
        ("inf\n", "not a finite number"),
        ("1\n2\n", "is not a number"),
    ],
)
def test_bad_reward_txt(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=r"/logs/verifier/reward\.txt") as caught:
        parse_reward_txt(text)
    assert why in str(caught.value)


def test_verifier_output_tail_keeps_the_last_lines_and_bytes() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    assert output_tail(text) == "".join(f"line {i}\n" for i in range(60, 100))
    assert output_tail("x" * 10_000) == "x" * 4000


def test_reward_json() -> None:
    assert parse_reward_json('{"reward": 1, "tests": 0.5}') == {"reward": 1.0, "tests": 0.5}
    for text, why in [
        ("", "is empty"),
        ("[1]", "must be a JSON object"),
        ("{}", "empty object"),
        ("{bad", "is not valid JSON"),
        ('{"reward": {"a": 1}}', "is nested"),
        ('{"reward": [1]}', "is nested"),
        ('{"reward": "1"}', "not a finite"),
        ('{"reward": true}', "not a finite"),
        ('{"reward": NaN}', "not a finite"),
        ('{"reward": Infinity}', "not a finite"),
    ]:
        with pytest.raises(ValueError, match=r"/logs/verifier/reward\.json") as caught:
            parse_reward_json(text)
        assert why in str(caught.value), text


class RecordingSandbox:
    """A sandbox double: records commands and uploads, serves files from a dict, and
    answers the test.sh run with a given result. (Real sandboxes: the integration test.)"""

    def __init__(self, files: Mapping[str, str], run: ExecResult | None = None) -> None:
        self.files = dict(files)
        self.run = run or ExecResult("", "", 0, False, 0.1)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.uploads: list[tuple[Path, str]] = []

    async def exec(self, cmd: str | Sequence[str], **kwargs: Any) -> ExecResult:
        self.calls.append((str(cmd), kwargs))
        if "test.sh" in str(cmd) or "solve.sh" in str(cmd):
            return self.run
        return ExecResult("", "", 0, False, 0.01)

    async def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path].encode()

    async def upload_dir(self, local: Path, remote: str) -> None:
        self.uploads.append((local, remote))


JSON, TXT, OUT = (
    "/logs/verifier/reward.json",
    "/logs/verifier/reward.txt",
    "/logs/verifier/test-stdout.txt",
)


@pytest.mark.parametrize(
    ("files", "reward", "values"),
    [
        ({TXT: "1\n"}, 1.0, {"reward": 1.0}),
        ({JSON: '{"reward": 0.5, "n": 2}', TXT: "1"}, 0.5, {"reward": 0.5, "n": 2.0}),
        ({JSON: '{"score": 0.75}'}, 0.75, {"score": 0.75}),
        ({JSON: '{"a": 0.25, "b": 1}', TXT: "0.5"}, 0.5, {"a": 0.25, "b": 1.0, "reward": 0.5}),
    ],
)
async def test_verifier_reads_rewards_by_harbors_rules(
    files: dict[str, str], reward: float, values: dict[str, float]
) -> None:
    task = load_task(TASKS / "edit-config", verifier_timeout_multiplier=2.0)
    sandbox = RecordingSandbox({**files, OUT: "diff output\n"})
    result = await run_verifier(sandbox, task, timeout_multiplier=1.5)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox
    assert (result.ok, result.reward, result.values, result.error) == (True, reward, values, None)
    assert result.stdout_tail == "diff output\n" and result.exit_code == 0
    prepare, run = sandbox.calls
    assert prepare[0].startswith("rm -rf /logs/verifier /tests && mkdir -p")
    assert sandbox.uploads == [(task.tests_dir, "/tests")]
    assert "bash /tests/test.sh" in run[0] and ">/logs/verifier/test-stdout.txt 2>&1" in run[0]
    assert run[1]["cwd"] == "/srv/service" and run[1]["timeout_s"] == 90.0  # 30 s x 2 x 1.5
    assert run[1]["env"] == {"EXPECTED_DIR": "/srv/service"}


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({}, "wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json"),
        ({TXT: "abc"}, "/logs/verifier/reward.txt is not a number: 'abc'"),
        ({TXT: "nan"}, "/logs/verifier/reward.txt holds 'nan', not a finite number"),
        ({JSON: '{"reward": {"x": 1}}', TXT: "1"}, "reward.json: value of 'reward' is nested"),
        ({JSON: '{"a": 1, "b": 0}'}, "has 2 values (a, b) and no 'reward' key"),
        ({TXT: ""}, "/logs/verifier/reward.txt is empty"),
    ],
)
async def test_bad_reward_files_fail_the_verification(files: dict[str, str], why: str) -> None:
    task = load_task(TASKS / "hello-file")
    result = await run_verifier(RecordingSandbox(files), task)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox
    assert (result.ok, result.reward, result.values, result.timed_out) == (False, None, {}, False)
    assert result.error is not None and why in result.error and "'hello-file'" in result.error


async def test_verifier_timeout_and_sandbox_death() -> None:
    task = load_task(TASKS / "hello-file")
    hung = ExecResult("", "", None, True, 30.0, error="timed out after 30 s")
    result = await run_verifier(RecordingSandbox({TXT: "1"}, hung), task)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox
    assert (result.ok, result.timed_out, result.reward) == (False, True, None)
    assert "timed out after 30 s" in str(result.error) and "timeout_sec = 30" in str(result.error)
    died = ExecResult("", "", None, False, 1.0, error="sandbox died: killed")
    result = await run_verifier(RecordingSandbox({TXT: "1"}, died), task)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox
    assert (result.ok, result.timed_out) == (False, False) and "sandbox died" in str(result.error)


async def test_oracle_runs_solve_sh_in_the_workdir(tmp_path: Path) -> None:
    task = load_task(TASKS / "edit-config", agent_timeout_multiplier=0.5)
    sandbox = RecordingSandbox({})
    result = await run_oracle(sandbox, task)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox
    assert result.ok
    assert sandbox.uploads == [(task.path / "solution", "/solution")]
    command, kwargs = sandbox.calls[-1]
    assert "bash /solution/solve.sh" in command
    assert (kwargs["cwd"], kwargs["timeout_s"]) == ("/srv/service", 60.0)
    bare = load_task(make_task(tmp_path, "no-oracle", solve_sh=None))
    with pytest.raises(HarborTaskError, match="'no-oracle' has no oracle"):
        await run_oracle(sandbox, bare)  # type: ignore[arg-type]  # a recording stand-in for a Sandbox


def test_check_takes_the_users_image_substitutes_and_names_the_fix(tmp_path: Path) -> None:
    task = tmp_path / "ubuntu-task"
    shutil.copytree(TASKS / "hello-file", task)
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN true\n")
    refused = check_task(task, substitutes={})
    assert not refused.ok and len(refused.problems) == 1
    problem = refused.problems[0]
    assert "FROM at line 1 names 'ubuntu:24.04'" in problem
    assert "substitute" in problem
    assert len(problem) < 600, problem  # a summary of what builds here, not 150 names
    substituted = check_task(task, substitutes={"ubuntu:24.04": "debian:trixie"})
    assert substituted.ok, substituted.problems
    cli_run = CliRunner().invoke(
        cli, ["bench", "check", str(task), "--image-substitute", "ubuntu:24.04=debian:trixie"]
    )
    assert cli_run.exit_code == 0, cli_run.output
