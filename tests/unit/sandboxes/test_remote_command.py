"""The command wrapper of the hosted backends, run by this host's ``/bin/sh`` (what a
Daytona or Modal sandbox runs), and the spec checks they share."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from rllm.errors import ConfigError
from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.remote import (
    RemoteCommand,
    check_spec,
    cut_counted,
    pack_dir,
    unpack_dir,
    user_prefix,
    whole_units,
    workdir_command,
)
from rllm.sandboxes.types import ExecResult, Mount, NetworkMode, SandboxSpec, cut_output


def _run(command: RemoteCommand, stdin: bytes | None = None) -> ExecResult:
    if command.stdin_path and stdin is not None:
        Path(command.stdin_path).write_bytes(stdin)
    started = time.monotonic()
    done = subprocess.run(["/bin/sh", "-c", command.script], capture_output=True, check=True)
    assert done.returncode == 0 and done.stderr == b""
    return command.parse(done.stdout.decode(), time.monotonic() - started)


@pytest.mark.parametrize("size", [0, 10, 1024, 1025, 5000])
def test_cut_counted_is_cut_output(size: int) -> None:
    data = ("é" * size).encode()[:size]
    assert cut_counted(data[:1024], len(data), 1024) == cut_output(data, 1024)


def test_exit_code_streams_and_cwd(tmp_path: Path) -> None:
    command = RemoteCommand.build(
        "echo out; echo err >&2; pwd; exit 5",
        cwd=str(tmp_path),
        limit=1000,
        timeout_s=10,
        user=None,
        has_stdin=False,
    )
    result = _run(command)
    assert (result.stdout, result.stderr, result.exit_code) == (f"out\n{tmp_path}\n", "err\n", 5)
    assert not result.timed_out and not result.truncated


def test_argv_stdin_and_a_missing_cwd() -> None:
    command = RemoteCommand.build(
        ["sh", "-c", 'cat; printf "|%s" "$0"', "it's"],
        cwd="/",
        limit=1000,
        timeout_s=None,
        user=None,
        has_stdin=True,
    )
    assert command.stdin_path is not None
    result = _run(command, b"in\x00put")
    assert result.stdout == "in\x00put|it's" and result.ok
    assert not Path(command.stdin_path).exists()
    lost = RemoteCommand.build(
        "true", cwd="/no/such", limit=100, timeout_s=5, user=None, has_stdin=False
    )
    assert _run(lost).exit_code == 1


def test_timeout_kills_even_what_left_the_group_and_flood_is_cut(tmp_path: Path) -> None:
    late = tmp_path / "late"
    # the sweep reads every process's environ on the host (hundreds here, a few in a
    # sandbox): the runaway waits 4 s so that a loaded host still sweeps before it
    command = RemoteCommand.build(
        f"setsid sh -c 'sleep 4; touch {late}' </dev/null >/dev/null 2>&1 &"
        " head -c 100000 /dev/zero; sleep 20",
        cwd="/",
        limit=2048,
        timeout_s=0.5,
        user=None,
        has_stdin=False,
    )
    result = _run(command)
    assert result.timed_out and result.exit_code is None and result.error == "timed out after 0.5 s"
    assert result.truncated and result.stdout == cut_output(b"\0" * 100000, 2048)
    time.sleep(4)
    assert not late.exists()
    assert command.server_timeout_s(100) == 1 + 2 + 5


def test_unreadable_output_names_what_the_image_needs() -> None:
    command = RemoteCommand.build(
        "true", cwd="/", limit=10, timeout_s=1, user=None, has_stdin=False
    )
    with pytest.raises(SandboxError, match="coreutils"):
        command.parse("sh: timeout: not found\n", 0.1)


def test_user_prefix() -> None:
    assert user_prefix(None) == ""
    assert user_prefix("1000") == "$S setpriv --reuid=1000 --regid=1000 --clear-groups -- "
    assert user_prefix("1000:50") == "$S setpriv --reuid=1000 --regid=50 --clear-groups -- "
    assert "id -u nobody" in user_prefix("nobody")
    with pytest.raises(ConfigError, match="'bad user;'"):
        user_prefix("bad user;")


def test_workdir_is_made_and_given_to_the_user() -> None:
    base = Path(tempfile.mkdtemp(prefix="rllm-workdir-"))  # pytest's tmp_path is root-only
    base.chmod(0o755)
    target = base / "a" / "work"
    subprocess.run(["/bin/sh", "-c", workdir_command(str(target), "65534")], check=True)
    assert target.is_dir() and target.stat().st_uid == 65534
    as_user = RemoteCommand.build(
        "id -u; touch x", cwd=str(target), limit=100, timeout_s=5, user="65534", has_stdin=False
    )
    result = _run(as_user)
    assert result.stdout == "65534\n" and result.ok and (target / "x").stat().st_uid == 65534
    shutil.rmtree(base)


def test_whole_units_and_spec_checks() -> None:
    assert whole_units(None, 1024, "memory_mb", "x") is None
    assert whole_units(4096, 1024, "memory_mb", "x") == 4
    with pytest.raises(ConfigError, match=r"memory_mb=1500 .* ask for 2048"):
        whole_units(1500, 1024, "memory_mb", "x")
    check_spec(SandboxSpec(disk_mb=10), "x", disk=True)
    with pytest.raises(ConfigError, match="disk_mb=10"):
        check_spec(SandboxSpec(disk_mb=10), "x", disk=False)
    mounted = SandboxSpec(mounts=(Mount(source=Path("/usr/bin"), target="/opt/bin"),))
    with pytest.raises(ConfigError, match="cannot bind this host's /usr/bin"):
        check_spec(mounted, "x", disk=True)
    gateway = SandboxSpec(network=NetworkMode.GATEWAY, gateway_url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="gateway"):
        check_spec(gateway, "x", disk=True)


def test_pack_and_unpack(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    unpack_dir(pack_dir(tmp_path / "a"), tmp_path / "out")
    assert (tmp_path / "out" / "b" / "f").read_text() == "x"
    with pytest.raises(FileNotFoundError):
        pack_dir(tmp_path / "none")
