"""``rllm-cli sandbox``: run, the line shell, ls, reap, image ls, snapshots, on the local
backend as a user types them."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from click.testing import CliRunner, Result

from rllm.cli.main import cli
from rllm.sandboxes import OWNER_LABEL, SandboxSettings, SandboxSpec, get_backend


@pytest.fixture
def runner(sandbox_settings: SandboxSettings, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("RLLM_SANDBOX_HOME", str(sandbox_settings.home))
    monkeypatch.setenv("RLLM_SANDBOX_BACKEND", "local")
    return CliRunner()


def test_run_prints_output_and_exits_with_the_commands_status(runner: CliRunner) -> None:
    done = runner.invoke(
        cli, ["sandbox", "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"]
    )
    assert done.exit_code == 3, done.output
    assert done.stdout == "out\n"
    assert "err\n" in done.stderr
    shell = runner.invoke(
        cli, ["sandbox", "run", "-e", "X=42", "--", "echo $X > /tmp/f; cat /tmp/f"]
    )
    assert (shell.exit_code, shell.stdout) == (0, "42\n")


def test_run_has_no_network_by_default(runner: CliRunner) -> None:
    done = runner.invoke(
        cli, ["sandbox", "run", "--", "cat /proc/net/dev | tail -n +3 | cut -d: -f1"]
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.split() == ["lo"]


def test_shell_keeps_the_directory_between_lines(runner: CliRunner) -> None:
    lines = "mkdir -p /srv/a && cd /srv/a\npwd\necho hi > f\ncat /srv/a/f\nexit\n"
    done = runner.invoke(cli, ["sandbox", "run"], input=lines)
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == ["/srv/a", "hi"]


def test_bad_duration_and_unknown_backend_are_named(runner: CliRunner) -> None:
    bad = runner.invoke(cli, ["sandbox", "reap", "--older-than", "soon"])
    assert bad.exit_code == 1 and "'soon' is not a duration" in bad.stderr
    unknown = runner.invoke(cli, ["sandbox", "ls", "--backend", "nope"])
    assert unknown.exit_code == 1 and "unknown sandbox backend 'nope'" in unknown.stderr


async def test_ls_and_reap_by_owner(runner: CliRunner, sandbox_settings: SandboxSettings) -> None:
    owner = f"cli-{uuid.uuid4().hex[:8]}"
    backend = get_backend("local", sandbox_settings)
    sandbox = await backend.create(SandboxSpec(labels={OWNER_LABEL: owner}))

    def invoke(*args: str) -> Result:  # the CLI runs its own event loop: not on this one
        return runner.invoke(cli, list(args))

    try:
        listed = await asyncio.to_thread(invoke, "sandbox", "ls", "--owner", owner, "--json")
        assert listed.exit_code == 0, listed.output
        rows = json.loads(listed.stdout)
        assert [(r["id"], r["labels"][OWNER_LABEL], r["alive"]) for r in rows] == [
            (sandbox.id, owner, True)
        ]
        young = await asyncio.to_thread(
            invoke, "sandbox", "reap", "--owner", owner, "--older-than", "1h"
        )
        assert "reaped 0 sandbox(es)" in young.stdout
        reaped = await asyncio.to_thread(invoke, "sandbox", "reap", "--owner", owner)
        assert f"reaped 1 sandbox(es): {sandbox.id}" in reaped.stdout
        assert not await sandbox.is_alive()
    finally:
        await sandbox.close()
        await backend.aclose()


def test_snapshot_create_list_use_delete(runner: CliRunner) -> None:
    name = f"cli-snap-{uuid.uuid4().hex[:8]}"
    made = runner.invoke(
        cli, ["sandbox", "snapshot", "create", name, "--setup", "echo baked > /opt/baked"]
    )
    assert made.exit_code == 0, made.output
    assert f"created snapshot {name}" in made.stdout
    listed = runner.invoke(cli, ["sandbox", "snapshot", "list", "--json"])
    assert [s["backend"] for s in json.loads(listed.stdout) if s["name"] == name] == ["local"]
    used = runner.invoke(cli, ["sandbox", "run", "--image", name, "--", "cat", "/opt/baked"])
    assert (used.exit_code, used.stdout) == (0, "baked\n")
    images = runner.invoke(cli, ["sandbox", "image", "ls", "--json"])
    assert {"debian:bookworm", name} <= {i["name"] for i in json.loads(images.stdout)}
    gone = runner.invoke(cli, ["sandbox", "snapshot", "delete", name])
    assert gone.exit_code == 0, gone.output
    again = runner.invoke(cli, ["sandbox", "snapshot", "delete", name])
    assert again.exit_code == 1 and name in again.stderr


def test_snapshot_setup_failure_is_reported(runner: CliRunner) -> None:
    failed = runner.invoke(
        cli, ["sandbox", "snapshot", "create", "never", "--setup", "echo broken >&2; exit 4"]
    )
    assert failed.exit_code == 1
    assert "exited 4" in failed.stderr and "broken" in failed.stderr
    listed = runner.invoke(cli, ["sandbox", "snapshot", "list", "--json"])
    assert "never" not in [s["name"] for s in json.loads(listed.stdout)]
