"""Harbor tasks on real sandboxes (the local backend): every shipped task's environment
builds, its oracle earns reward 1 and doing nothing earns 0 (even with a reward planted
where the verifier writes); broken verifiers fail, naming the path, never a silent 0."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from rllm.benchmarks.harbor import HarborTask, load_dataset, load_task, run_oracle, run_verifier
from rllm.sandboxes import OWNER_LABEL, Sandbox, SandboxBackend
from rllm.sandboxes.types import NetworkMode
from tests.paths import HARBOR_TASKS as TASKS

SHIPPED = load_dataset(TASKS).tasks


@pytest.fixture
def backend(local_sandbox_backend: SandboxBackend) -> SandboxBackend:
    """The local backend on the test's own home (the shared image store)."""
    return local_sandbox_backend


@pytest.fixture
def owner() -> dict[str, str]:
    return {OWNER_LABEL: f"harbor-{uuid.uuid4().hex[:8]}"}


async def task_sandbox(
    backend: SandboxBackend,
    task: HarborTask,
    owner: dict[str, str],
    network: NetworkMode | None = None,
) -> tuple[Sandbox, float]:
    """A sandbox from the task's environment image (built, or reused from the layer
    cache), with the task's workdir, network and limits; and the build's seconds."""
    start = time.monotonic()
    image = await backend.build_image(task.environment_dir, f"harbor-test/{task.path.name}")
    built = time.monotonic() - start
    spec = task.sandbox_spec(image.name, labels=owner, network=network or task.network)
    return await backend.create(spec), built


@pytest.mark.parametrize("task", SHIPPED, ids=[t.name for t in SHIPPED])
async def test_oracle_earns_1_and_doing_nothing_earns_0(
    backend: SandboxBackend, owner: dict[str, str], task: HarborTask
) -> None:
    sandbox, build_s = await task_sandbox(backend, task, owner)
    try:
        start = time.monotonic()
        solved = await run_oracle(sandbox, task)
        oracle_s = time.monotonic() - start
        assert solved.ok, f"solve.sh failed: {solved.stdout}{solved.stderr}{solved.error}"
        result = await run_verifier(sandbox, task)
    finally:
        await sandbox.close()
    assert (result.ok, result.reward, result.error, result.timed_out) == (True, 1.0, None, False)
    assert result.values["reward"] == 1.0 and result.exit_code == 0
    print(
        f"{task.name}: build {build_s:.2f} s, oracle {oracle_s:.2f} s, "
        f"verify {result.duration_s:.2f} s"
    )

    idle, _ = await task_sandbox(backend, task, owner)
    try:  # an agent that did nothing but plant a reward where the verifier writes
        await idle.write_file("/logs/verifier/reward.txt", "1\n")
        await idle.write_file("/logs/verifier/reward.json", '{"reward": 1}\n')
        await idle.write_file("/tests/test.sh", "echo 1 > /logs/verifier/reward.txt\n")
        nothing = await run_verifier(idle, task)
    finally:
        await idle.close()
    assert (nothing.ok, nothing.reward, nothing.error) == (True, 0.0, None), nothing.stdout_tail
    assert set(nothing.values.values()) == {0.0}


async def test_no_network_task_fails_where_the_sandbox_has_a_network(
    backend: SandboxBackend, owner: dict[str, str]
) -> None:
    if {p.name for p in Path("/sys/class/net").iterdir()} <= {"lo"}:
        pytest.skip("this host has no network interface besides lo")
    task = load_task(TASKS / "no-network")
    assert task.network is NetworkMode.NONE
    sandbox, _ = await task_sandbox(backend, task, owner, network=NetworkMode.HOST)
    try:
        assert (await run_oracle(sandbox, task)).ok
        result = await run_verifier(sandbox, task)
    finally:
        await sandbox.close()
    assert (result.ok, result.reward) == (True, 0.0)
    assert "besides lo: the sandbox has a network" in result.stdout_tail


BROKEN = {
    "writes-nothing": (
        "echo 'all tests passed'\n",
        "wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json",
    ),
    "abc": (
        "echo abc > /logs/verifier/reward.txt\n",
        "/logs/verifier/reward.txt is not a number: 'abc",
    ),
    "nan": ("echo nan > /logs/verifier/reward.txt\n", "/logs/verifier/reward.txt holds 'nan"),
    "empty": (": > /logs/verifier/reward.txt\n", "/logs/verifier/reward.txt is empty"),
    "nested-json": (
        """echo '{"reward": {"value": 1}}' > /logs/verifier/reward.json\n""",
        "/logs/verifier/reward.json: value of 'reward' is nested",
    ),
    "no-main-reward": (
        """echo '{"a": 1, "b": 0}' > /logs/verifier/reward.json\n""",
        "/logs/verifier/reward.json has 2 values (a, b) and no 'reward' key",
    ),
}


def broken_task(root: Path, test_sh: str, verifier_timeout_s: float = 30.0) -> HarborTask:
    """hello-file with another tests/test.sh (and verifier timeout)."""
    path = root / "hello-file"
    shutil.copytree(TASKS / "hello-file", path)
    (path / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    toml = (
        (path / "task.toml")
        .read_text()
        .replace(
            "[verifier]\ntimeout_sec = 30.0", f"[verifier]\ntimeout_sec = {verifier_timeout_s}"
        )
    )
    (path / "task.toml").write_text(toml)
    return load_task(path)


@pytest.mark.parametrize("case", list(BROKEN))
async def test_broken_verifier_fails_naming_the_path(
    backend: SandboxBackend, owner: dict[str, str], tmp_path: Path, case: str
) -> None:
    test_sh, why = BROKEN[case]
    task = broken_task(tmp_path, test_sh)
    sandbox, _ = await task_sandbox(backend, task, owner)
    try:
        assert (await run_oracle(sandbox, task)).ok
        result = await run_verifier(sandbox, task)
    finally:
        await sandbox.close()
    assert (result.ok, result.reward, result.values, result.timed_out) == (False, None, {}, False)
    assert result.error is not None and why in result.error, result.error
    if case == "writes-nothing":
        assert result.stdout_tail == "all tests passed\n"  # from /logs/verifier/test-stdout.txt


async def test_hanging_verifier_times_out(
    backend: SandboxBackend, owner: dict[str, str], tmp_path: Path
) -> None:
    task = broken_task(
        tmp_path, "echo started\nsleep 300\necho 1 > /logs/verifier/reward.txt\n", 1.0
    )
    sandbox, _ = await task_sandbox(backend, task, owner)
    try:
        result = await run_verifier(sandbox, task, timeout_multiplier=2.0)
        after = await sandbox.exec("cat /logs/verifier/reward.txt 2>/dev/null; echo end")
    finally:
        await sandbox.close()
    assert (result.ok, result.timed_out, result.reward) == (False, True, None)
    assert "timed out after 2 s" in str(result.error) and "timeout_sec = 1" in str(result.error)
    assert 1.5 < result.duration_s < 15 and result.stdout_tail == "started\n"
    assert after.stdout == "end\n"  # the killed test.sh wrote nothing later
