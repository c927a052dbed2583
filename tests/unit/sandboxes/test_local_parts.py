"""Pure parts of the local sandbox backend: argv building, the gateway address rule,
output cutting of a drained stream, and the error when bubblewrap is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rllm.sandboxes.errors import SandboxError, SandboxUnavailableError
from rllm.sandboxes.forward import gateway_address
from rllm.sandboxes.local import process
from rllm.sandboxes.local.exec import Command, Entry, enter_argv
from rllm.sandboxes.local.process import bwrap_argv, join_cgroups
from rllm.sandboxes.types import NetworkMode, SandboxSpec, cut_output


def _command(cwd: str | None = None, uid: int = 0) -> Command:
    return Command(["true"], cwd, {}, uid, uid, None, None, 1024)


def test_enter_joins_cgroups_then_runs_with_docker_privileges() -> None:
    entry = Entry("/x/rllm-sandbox-enter", "/x/f.bpf", 42)
    argv = enter_argv(entry, ["/cg/e1/cgroup.procs"], _command())
    assert argv[:5] == ["/x/rllm-sandbox-enter", "--pid", "42", "--cgroup", "/cg/e1/cgroup.procs"]
    assert argv[argv.index("--caps") + 1] == "a80425fb"
    assert argv[argv.index("--seccomp") + 1] == "/x/f.bpf"
    assert "--cwd" not in argv  # the sandbox's workdir, never a host directory
    assert argv[-2:] == ["--", "true"]


def test_enter_changes_user_and_directory_inside() -> None:
    argv = enter_argv(Entry("e", "f", 7), [], _command(cwd="/srv", uid=1000))
    assert argv[argv.index("--uid") + 1] == "1000" and argv[argv.index("--gid") + 1] == "1000"
    assert argv[argv.index("--cwd") + 1] == "/srv"
    assert argv[argv.index("--") + 1 :] == ["true"]


def test_join_cgroups_prefix_ends_with_separator() -> None:
    prefix = join_cgroups(["/cg/a/cgroup.procs"], ulimit_kb=1024)
    assert prefix[:2] == ["/bin/sh", "-c"] and "ulimit -v 1024" in prefix[2]
    assert prefix[-2:] == ["/cg/a/cgroup.procs", "--"]


def test_bwrap_isolates_the_network_unless_host() -> None:
    none = bwrap_argv("bwrap", Path("/m"), SandboxSpec(), "h", "/w")
    host = bwrap_argv("bwrap", Path("/m"), SandboxSpec(network=NetworkMode.HOST), "h", "/w")
    assert "--unshare-net" in none and "--unshare-net" not in host
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--die-with-parent"):
        assert flag in none
    assert none[none.index("--bind") + 1 : none.index("--bind") + 3] == ["/m", "/"]
    assert none[none.index("--ro-bind") + 1 : none.index("--ro-bind") + 3] == [
        "/proc/bus",
        "/proc/bus",
    ]
    assert none[none.index("/sys") - 1 : none.index("/sys") + 2] == ["--ro-bind", "/sys", "/sys"]


def test_gateway_address_is_loopback_only() -> None:
    assert gateway_address("http://127.0.0.1:8400/v1") == ("127.0.0.1", 8400)
    assert gateway_address("http://localhost:9000") == ("127.0.0.1", 9000)
    assert gateway_address("http://[::1]:81") == ("::1", 81)
    with pytest.raises(SandboxError, match="not a loopback address"):
        gateway_address("http://10.1.2.3:8400")


def test_cut_output_of_a_drained_stream_counts_what_was_dropped() -> None:
    assert cut_output(b"abc", 10, total=3) == "abc"
    cut = cut_output(b"x" * 10, 10, total=1000)
    assert cut == "x" * 10 + "\n[rllm: output cut, 990 of 1000 bytes dropped]\n"


def test_missing_bubblewrap_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(process.shutil, "which", lambda n: None if n == "bwrap" else real(n))
    with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap"):
        process.require_tools()
