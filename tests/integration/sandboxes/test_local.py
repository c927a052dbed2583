"""The local backend for real: bubblewrap over an overlay of the debootstrapped base
image, its isolation (files, processes, network, memory) and its lifecycle (close, reap,
snapshots). Needs root, bubblewrap and overlayfs; the base image is built once."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rllm.sandboxes.errors import SandboxClosedError, SnapshotError
from rllm.sandboxes.images.store import ImageStore
from rllm.sandboxes.local.backend import LocalBackend
from rllm.sandboxes.local.overlay import RootfsDirs
from rllm.sandboxes.local.sandbox import LocalSandbox
from rllm.sandboxes.local.state import process_start
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import OWNER_LABEL, Mount, NetworkMode, SandboxSpec
from tests.integration.sandboxes.backends import local_backend
from tests.integration.sandboxes.trees import write_tree


@pytest.fixture
async def backend(sandbox_settings: SandboxSettings) -> AsyncIterator[LocalBackend]:
    """A local backend on the test's own home; closes what it made and removes the home."""
    async with local_backend(sandbox_settings) as made:
        yield made


@pytest.fixture
async def sandbox(backend: LocalBackend) -> AsyncIterator[LocalSandbox]:
    """One sandbox from the base image, no network."""
    made = await backend.create(SandboxSpec(labels={OWNER_LABEL: "test-local"}))
    yield made
    await made.close()


def _host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    if marker.encode() in file.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _mounted(path: str) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as file:
        return any(path in line for line in file)


# --- exec ------------------------------------------------------------------------------


async def test_exec_stdout_exit_code_env_cwd(sandbox: LocalSandbox) -> None:
    ok = await sandbox.exec("echo hello; echo oops >&2", env={"GREETING": "hi"})
    assert (ok.stdout, ok.stderr, ok.exit_code, ok.timed_out) == ("hello\n", "oops\n", 0, False)
    failed = await sandbox.exec(["sh", "-c", "exit 7"])
    assert failed.exit_code == 7 and failed.error is None
    env = await sandbox.exec("echo $GREETING:$HOME:$PATH", env={"GREETING": "hi"})
    assert env.stdout.startswith("hi:/root:/usr/local/sbin")
    assert (await sandbox.exec("pwd")).stdout == "/workspace\n"
    assert (await sandbox.exec(["pwd"], cwd="/tmp")).stdout == "/tmp\n"
    assert (await sandbox.exec("cat", stdin="fed in")).stdout == "fed in"
    missing = await sandbox.exec(["/no/such/program"])
    assert missing.exit_code not in (0, None)


async def test_exec_as_a_non_root_user_keeps_owners(sandbox: LocalSandbox) -> None:
    made = await sandbox.exec("useradd -m -u 1234 agent && install -d -o agent /workspace/own")
    assert made.exit_code == 0, made.stderr
    who = await sandbox.exec("id -u; id -g; echo $HOME; touch /workspace/own/f", user="agent")
    assert who.stdout.split() == ["1234", "1234", "/home/agent"], who.stderr
    owners = await sandbox.exec("stat -c %u /workspace/own/f /home/agent")
    assert owners.stdout.split() == ["1234", "1234"]
    assert (await sandbox.exec("id -u", user="65534")).stdout == "65534\n"
    denied = await sandbox.exec("touch /etc/forbidden", user="agent")
    assert denied.exit_code == 1 and "Permission denied" in denied.stderr


async def test_a_non_root_user_reaches_a_host_mount_under_a_new_folder(
    backend: LocalBackend, tmp_path: Path
) -> None:
    tool = tmp_path / "tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "hello").write_text("#!/bin/sh\necho hello from the host\n")
    (tool / "bin" / "hello").chmod(0o755)
    tool.chmod(0o755)
    spec = SandboxSpec(mounts=(Mount(source=tool, target="/opt/rllm-test/tool"),))
    sandbox = await backend.create(spec)
    try:  # the mount point's parent did not exist: it is made 0755, not bubblewrap's 0700
        assert (await sandbox.exec("stat -c %a /opt/rllm-test")).stdout == "755\n"
        ran = await sandbox.exec("/opt/rllm-test/tool/bin/hello", user="65534")
        assert (ran.exit_code, ran.stdout) == (0, "hello from the host\n"), ran.stderr
    finally:
        await sandbox.close()


async def test_timeout_kills_the_whole_tree_including_setsid_grandchildren(
    sandbox: LocalSandbox,
) -> None:
    marker = f"{4000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    start = time.monotonic()
    result = await sandbox.exec(
        f"setsid sh -c 'sleep {marker} & sleep {marker}' & (sleep {marker} &) ; sleep {marker}",
        timeout_s=0.5,
    )
    assert result.timed_out and result.exit_code is None
    assert result.error is not None and "timed out" in result.error
    assert time.monotonic() - start < 3.0
    await asyncio.sleep(0.05)
    assert _host_pids_with(f"sleep\0{marker}") == []
    assert (await sandbox.exec("echo still here")).stdout == "still here\n"


def _proc_state(pid: int) -> str | None:
    """A process's state letter (``Z``: exited, not reaped yet); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


async def test_a_timed_out_command_is_reaped_by_asyncio_alone(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: harness training printed ``Unknown child process pid …, will report
    returncode 255``. Killing a timed-out command through ``Process.send_signal`` polls
    (``waitpid``) first, so a command already dead was reaped on the loop's thread, and
    asyncio's child watcher thread, which waits for that pid too, found none and logged it.
    A busy machine (torch training next to the rollouts) is simulated: the loop's thread
    is descheduled after the kill until the command has exited, and the watcher runs late."""
    import rllm.sandboxes.local.exec as local_exec

    real_waitpid, real_killpg = os.waitpid, os.killpg

    def watcher_runs_late(pid: int, options: int) -> tuple[int, int]:
        if "waitpid" in threading.current_thread().name:  # asyncio's watcher thread
            while _proc_state(pid) not in ("Z", None):
                time.sleep(0.005)
            time.sleep(0.2)
        return real_waitpid(pid, options)

    def kill_then_descheduled(pgid: int, sig: int) -> None:
        real_killpg(pgid, sig)
        deadline = time.monotonic() + 5
        while _proc_state(pgid) not in ("Z", None) and time.monotonic() < deadline:
            time.sleep(0.001)

    monkeypatch.setattr(os, "waitpid", watcher_runs_late)
    monkeypatch.setattr(local_exec.os, "killpg", kill_then_descheduled)
    caplog.set_level(logging.WARNING, logger="asyncio")
    result = await sandbox.exec("sleep 30", timeout_s=0.3)
    assert result.timed_out and result.exit_code is None
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


async def test_background_children_outlive_a_finished_command(sandbox: LocalSandbox) -> None:
    started = await sandbox.exec("sleep 30 >/dev/null 2>&1 & echo started", timeout_s=5)
    assert started.stdout == "started\n" and started.duration_s < 2.0
    assert "sleep 30" in (
        await sandbox.exec("ps -eo args 2>/dev/null || cat /proc/*/cmdline")
    ).stdout.replace("\0", " ")


async def test_output_flood_is_cut_with_a_marker(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(output_limit_bytes=10_000))
    try:
        result = await sandbox.exec("head -c 30000000 /dev/zero | tr '\\0' x; echo done >&2")
        assert result.exit_code == 0 and result.truncated
        assert result.stdout.startswith("x" * 10_000)
        assert "[rllm: output cut, 29990000 of 30000000 bytes dropped]" in result.stdout
        assert len(result.stdout) < 10_200
        assert result.stderr == "done\n"
    finally:
        await sandbox.close()


# --- files -----------------------------------------------------------------------------


async def test_files_in_and_out(sandbox: LocalSandbox, tmp_path: Path) -> None:
    await sandbox.write_file("/workspace/deep/a.txt", "alpha", mode=0o600)
    assert await sandbox.read_file("/workspace/deep/a.txt") == b"alpha"
    listed = await sandbox.exec("stat -c '%a %s' /workspace/deep/a.txt; cat /workspace/deep/a.txt")
    assert listed.stdout == "600 5\nalpha"
    await sandbox.exec("echo made inside > /tmp/inside.txt")
    assert await sandbox.read_file("/tmp/inside.txt") == b"made inside\n"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/workspace/missing")

    source = write_tree(tmp_path / "src", {"top.txt": "top", "sub/run.sh": "#!/bin/sh\necho ran\n"})
    (source / "sub" / "run.sh").chmod(0o755)
    await sandbox.upload_dir(source, "/workspace/project")
    assert (await sandbox.exec("/workspace/project/sub/run.sh")).stdout == "ran\n"
    await sandbox.exec("mkdir -p /workspace/out/n && echo result > /workspace/out/n/r.txt")
    target = tmp_path / "dst"
    await sandbox.download_dir("/workspace/out", target)
    assert (target / "n" / "r.txt").read_text() == "result\n"


async def test_symlinks_inside_never_reach_host_files(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("original")
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("host secret")
    await sandbox.exec(
        f"mkdir -p /workspace/links {tmp_path} && ln -s {canary} /workspace/links/canary && "
        f"ln -s {secret_dir} /workspace/links/dir && ln -s /proc/1/root /workspace/links/p1 && "
        f"ln -s ../../../../../../.. /workspace/links/up"
    )
    await sandbox.write_file("/workspace/links/canary", "pwned")
    assert canary.read_text() == "original"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file(f"/workspace/links/up{secret_dir}/key")
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/workspace/links/dir/key")
    with pytest.raises(OSError):
        await sandbox.read_file("/workspace/links/p1/etc/hostname")
    # the write landed inside, at the link's target resolved in the sandbox's root
    assert (await sandbox.exec(f"cat {canary}")).stdout == "pwned"
    out = tmp_path / "out"
    await sandbox.download_dir("/workspace/links", out)
    assert (out / "dir").is_symlink() and os.readlink(out / "dir") == str(secret_dir)
    assert (secret_dir / "key").read_text() == "host secret"
    await sandbox.download_dir("/workspace/links", out)  # again, over the links it made
    assert canary.read_text() == "original"


async def test_cannot_write_outside_root_or_see_host(sandbox: LocalSandbox, tmp_path: Path) -> None:
    canary = tmp_path / "host.txt"
    canary.write_text("host")
    result = await sandbox.exec(
        f"echo x > {canary}; cd / && cd .. && ls; echo --; ls -a /proc/self/cwd/.."
    )
    assert canary.read_text() == "host"
    inside = set((await sandbox.exec("ls -a /")).stdout.split())
    host_only = set(os.listdir("/")) - inside
    seen = set(result.stdout.split())
    assert "workspace" in seen and not host_only & seen
    host_marker = f"{5000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    host_sleep = subprocess.Popen(["sleep", host_marker])
    try:
        procs = await sandbox.exec("ls /proc | grep -E '^[0-9]+$'; cat /proc/[0-9]*/cmdline")
        pids = [int(line) for line in procs.stdout.split("\n") if line.isdigit()]
        assert host_marker not in procs.stdout
        assert str(os.getpid()) not in procs.stdout.split() or os.getpid() < 10
        assert max(pids) < 100 and len(pids) < 8
    finally:
        host_sleep.kill()
        host_sleep.wait()


# --- network ---------------------------------------------------------------------------


async def _http_server(body: bytes) -> tuple[asyncio.Server, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


_GET = "exec 3<>/dev/tcp/127.0.0.1/{port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"


async def test_network_none_has_only_loopback(backend: LocalBackend) -> None:
    server, port = await _http_server(b"host only")
    sandbox = await backend.create(SandboxSpec(network=NetworkMode.NONE))
    try:
        devices = await sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert devices.stdout.split() == ["lo"]
        reach = await sandbox.exec(["bash", "-c", _GET.format(port=port)], timeout_s=5)
        assert reach.exit_code != 0 and "host only" not in reach.stdout
    finally:
        await sandbox.close()
        server.close()


async def test_network_gateway_reaches_the_gateway_and_nothing_else(backend: LocalBackend) -> None:
    gateway, port = await _http_server(b"from the gateway")
    other, other_port = await _http_server(b"must not be seen")
    spec = SandboxSpec(network=NetworkMode.GATEWAY, gateway_url=f"http://127.0.0.1:{port}/v1")
    sandbox = await backend.create(spec)
    try:
        reach = await sandbox.exec(["bash", "-c", _GET.format(port=port)], timeout_s=5)
        assert reach.exit_code == 0 and reach.stdout.endswith("from the gateway"), reach.stderr
        again = await sandbox.exec(["bash", "-c", _GET.format(port=port)], timeout_s=5)
        assert again.stdout.endswith("from the gateway")
        blocked = await sandbox.exec(["bash", "-c", _GET.format(port=other_port)], timeout_s=5)
        assert blocked.exit_code != 0 and "must not be seen" not in blocked.stdout
        devices = await sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert devices.stdout.split() == ["lo"]
    finally:
        await sandbox.close()
        gateway.close()
        other.close()
    threads = {t.name for t in threading.enumerate()}
    assert "rllm-forward-setns" not in threads


# --- limits ----------------------------------------------------------------------------


async def test_memory_limit_kills_the_hog_not_the_host(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(memory_mb=64, cpus=0.5, pids=64))
    try:
        state = sandbox._parts.state
        groups = [Path(p) for p in [*state.cgroup_limits, state.cgroup_tracker] if p]
        written = {
            ("memory.limit_in_bytes", "memory.max"): str(64 << 20),
            ("cpu.cfs_quota_us", "cpu.max"): "50000",
            ("pids.max",): "64",
        }
        for names, value in written.items():
            found = [g / n for g in groups for n in names if (g / n).exists()]
            assert found and found[0].read_text().split()[0] == value
        hog = await sandbox.exec("head -c 400000000 /dev/zero | tail > /dev/null", timeout_s=30)
        assert hog.exit_code == 137, hog
        assert await sandbox.is_alive()
        assert (await sandbox.exec("echo fine")).stdout == "fine\n"
    finally:
        await sandbox.close()


async def test_disk_limit_refuses_writes_past_it(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(disk_mb=8))
    try:
        small = await sandbox.exec("head -c 1000000 /dev/zero > /workspace/ok && echo ok")
        assert small.stdout == "ok\n"
        big = await sandbox.exec("head -c 20000000 /dev/zero > /workspace/big")
        assert big.exit_code != 0 and "No space left" in big.stderr
    finally:
        await sandbox.close()


# --- lifecycle -------------------------------------------------------------------------


async def test_snapshot_then_create_from_it_sees_the_files(backend: LocalBackend) -> None:
    source = await backend.create(SandboxSpec(env={"FROM_SNAPSHOT": "1"}))
    name = f"test-snap-{uuid.uuid4().hex[:8]}"
    store = ImageStore(backend.settings.images_dir)
    try:
        await source.exec("echo kept > /workspace/kept.txt && rm /etc/hostname && mkdir /opt/x")
        start = time.monotonic()
        info = await source.snapshot(name)
        print(f"\nlocal snapshot: {(time.monotonic() - start) * 1000:.1f} ms")
        assert (info.name, info.backend, info.image) == (name, "local", name)
        assert [s.name for s in await backend.snapshots.all()] == [name]
        child = await backend.create(SandboxSpec(image=info.image))
        try:
            seen = await child.exec("cat /workspace/kept.txt; ls /etc/hostname; ls -d /opt/x")
            assert seen.stdout.startswith("kept\n") and "/opt/x" in seen.stdout
            assert "No such file" in seen.stderr
            assert (await child.exec("echo $FROM_SNAPSHOT")).stdout == "1\n"
        finally:
            await child.close()
    finally:
        await source.close()
        layers = store.get(name).layers
        await backend.snapshots.delete(name)
        shutil.rmtree(layers[-1], ignore_errors=True)
    assert store.find(name) is None and await backend.snapshots.all() == []
    with pytest.raises(SnapshotError):
        await backend.snapshots.delete(name)


async def test_close_is_idempotent_and_leaves_nothing(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(memory_mb=128, labels={OWNER_LABEL: "closing"}))
    state = sandbox._parts.state
    await sandbox.exec("sleep 300 >/dev/null 2>&1 &")
    assert _mounted(str(state.dirs.merged))
    await sandbox.close()
    await sandbox.close()
    assert not Path(state.run_dir).exists()
    assert not _mounted(str(state.dirs.merged))
    assert state.pid is not None and state.init_pid is not None
    assert process_start(state.pid) is None and process_start(state.init_pid) is None
    for group in [state.cgroup_tracker, *state.cgroup_limits]:
        assert group is not None and not Path(group).exists()
    assert not await sandbox.is_alive()
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")
    assert await backend.sandboxes({OWNER_LABEL: "closing"}) == []


async def test_lifetime_ends_the_sandbox_and_exec_says_why(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(lifetime_s=1.0))
    result = await sandbox.exec("sleep 5", timeout_s=10)
    assert result.exit_code is None and not result.timed_out
    assert result.error is not None and "lifetime" in result.error
    await asyncio.sleep(0.1)
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")


_LEAKER = """
import asyncio, os, signal, sys
from pathlib import Path
from rllm.sandboxes.local.backend import LocalBackend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import SandboxSpec

async def main():
    backend = LocalBackend(SandboxSettings(home=Path(sys.argv[1])))
    sandbox = await backend.create(SandboxSpec(labels={"rllm.owner": sys.argv[2]}))
    print(sandbox.id, flush=True)
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def _leak(backend: LocalBackend, owner: str, how: str) -> subprocess.CompletedProcess[str]:
    """Run ``_LEAKER`` in a process of its own: it creates a sandbox owned by ``owner``,
    prints its id, then ends as ``how`` says (``kill``: SIGKILL; else a plain exit)."""
    return subprocess.run(
        [sys.executable, "-c", _LEAKER, str(backend.settings.home), owner, how],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_reap_finds_a_sandbox_whose_owner_died(backend: LocalBackend) -> None:
    owner = f"run-{uuid.uuid4().hex[:8]}"
    leak = _leak(backend, owner, "kill")
    assert leak.returncode == -signal.SIGKILL, leak.stderr
    leaked_id = leak.stdout.strip()
    found = await backend.sandboxes({OWNER_LABEL: owner})
    assert [s.id for s in found] == [leaked_id]
    run_dir = backend.settings.run_dir / leaked_id
    merged = RootfsDirs(run_dir).merged
    assert _mounted(str(merged))
    assert await backend.reap({OWNER_LABEL: "someone-else"}) == []
    assert await backend.reap({OWNER_LABEL: owner}) == [leaked_id]
    assert not run_dir.exists() and not _mounted(str(merged)) and not merged.exists()
    assert await backend.sandboxes({OWNER_LABEL: owner}) == []


async def test_create_and_exec_figures(backend: LocalBackend) -> None:
    """Not a pass/fail figure: printed for the report (perf/ has the real benchmark)."""
    creates, execs = [], []
    for _ in range(8):
        start = time.perf_counter()
        sandbox = await backend.create(SandboxSpec())
        creates.append(time.perf_counter() - start)
        for _ in range(5):
            start = time.perf_counter()
            assert (await sandbox.exec(["true"])).exit_code == 0
            execs.append(time.perf_counter() - start)
        await sandbox.close()
    print(
        f"\nlocal create p50 {statistics.median(creates) * 1000:.1f} ms, "
        f"exec p50 {statistics.median(execs) * 1000:.1f} ms"
    )
    assert len(creates) == 8


async def test_a_sandbox_closes_at_exit_and_at_garbage_collection(backend: LocalBackend) -> None:
    owner = f"run-{uuid.uuid4().hex[:8]}"
    done = _leak(backend, owner, "exit")
    assert done.returncode == 0, done.stderr
    assert not (backend.settings.run_dir / done.stdout.strip()).exists()
    assert await backend.sandboxes({OWNER_LABEL: owner}) == []

    sandbox = await backend.create(SandboxSpec())
    run_dir, pid = Path(sandbox._parts.state.run_dir), sandbox._parts.state.pid
    del sandbox
    gc.collect()
    assert not run_dir.exists()
    assert pid is not None and process_start(pid) is None
