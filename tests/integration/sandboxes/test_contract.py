"""The contract every sandbox backend passes: local (bubblewrap), docker (the dockerd CI
starts), daytona and modal (their SDKs against fakes at their HTTP or Python boundary).

One suite, run once per backend, like the history store's contract tests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rllm.sandboxes import (
    OWNER_LABEL,
    SandboxBackend,
    SandboxClosedError,
    SandboxSettings,
    SandboxSpec,
)
from rllm.sandboxes.pool import WarmPool
from tests.integration.sandboxes.backends import open_backend
from tests.integration.sandboxes.trees import write_tree

BACKENDS = ["local", "docker", "daytona", "modal"]

# every process still running in the sandbox, one command line a line (minbase has no ps)
LIST_PROCESSES = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"


@pytest.fixture(params=BACKENDS)
async def backend(
    request: pytest.FixtureRequest, sandbox_settings: SandboxSettings
) -> AsyncIterator[SandboxBackend]:
    async with open_backend(request.param, sandbox_settings, request) as backend:
        yield backend


@pytest.fixture
def owner() -> dict[str, str]:
    return {OWNER_LABEL: f"contract-{uuid.uuid4().hex[:8]}"}


def spec(owner: dict[str, str], **overrides: object) -> SandboxSpec:
    fields: dict[str, object] = {"image": "debian:bookworm", "labels": owner, **overrides}
    return SandboxSpec(**fields)


async def test_exec_results_exit_codes_env_and_cwd(
    backend: SandboxBackend, owner: dict[str, str]
) -> None:
    sandbox = await backend.create(spec(owner, env={"GREETING": "hello"}))
    try:
        ok = await sandbox.exec("echo $GREETING; echo oops >&2")
        assert (ok.stdout, ok.stderr, ok.exit_code, ok.timed_out) == ("hello\n", "oops\n", 0, False)
        failed = await sandbox.exec(["sh", "-c", "exit 7"])
        assert (failed.exit_code, failed.ok, failed.timed_out) == (7, False, False)
        missing = await sandbox.exec(["/no/such/program"])
        assert missing.exit_code not in (0, None)
        where = await sandbox.exec("pwd; echo $A-$GREETING", cwd="/tmp", env={"A": "x"})
        assert where.stdout == "/tmp\nx-hello\n"
        default_dir = await sandbox.exec("pwd")
        assert default_dir.stdout == "/workspace\n"
        fed = await sandbox.exec("cat; echo", stdin="from stdin")
        assert fed.stdout == "from stdin\n"
    finally:
        await sandbox.close()


async def test_user_of_commands(backend: SandboxBackend, owner: dict[str, str]) -> None:
    sandbox = await backend.create(spec(owner))
    try:
        root = await sandbox.exec("id -u")
        assert root.stdout.strip() == "0"
        nobody = await sandbox.exec("id -u; id -g", user="65534:65534")
        assert nobody.stdout.split() == ["65534", "65534"]
        denied = await sandbox.exec("touch /root/x", user="65534:65534")
        assert denied.exit_code != 0
    finally:
        await sandbox.close()


async def test_timeout_kills_the_whole_tree(backend: SandboxBackend, owner: dict[str, str]) -> None:
    sandbox = await backend.create(spec(owner))
    try:
        hung = await sandbox.exec(
            "setsid sleep 301.25 < /dev/null > /dev/null 2>&1 & sleep 302.5", timeout_s=1.0
        )
        assert hung.timed_out and hung.exit_code is None
        assert hung.duration_s < 10
        await asyncio.sleep(0.3)
        left = await sandbox.exec(LIST_PROCESSES)
        assert "sleep 301.25" not in left.stdout and "sleep 302.5" not in left.stdout
    finally:
        await sandbox.close()


async def test_output_is_cut_with_a_marker(backend: SandboxBackend, owner: dict[str, str]) -> None:
    sandbox = await backend.create(spec(owner, output_limit_bytes=4096))
    try:
        flood = await sandbox.exec("head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2")
        assert flood.truncated
        assert flood.exit_code == 0
        assert flood.stdout.startswith("a" * 4096)
        assert len(flood.stdout) < 4096 + 200
        assert "output cut" in flood.stdout
        assert flood.stderr == "done\n"
    finally:
        await sandbox.close()


async def test_files_in_and_out(
    backend: SandboxBackend, owner: dict[str, str], tmp_path: Path
) -> None:
    sandbox = await backend.create(spec(owner))
    try:
        await sandbox.write_file("/workspace/deep/dir/a.txt", "alpha\n")
        await sandbox.write_file("/workspace/run.sh", b"#!/bin/sh\necho ran\n", mode=0o755)
        assert (await sandbox.exec("cat deep/dir/a.txt && ./run.sh")).stdout == "alpha\nran\n"
        assert await sandbox.read_file("/workspace/deep/dir/a.txt") == b"alpha\n"
        with pytest.raises(FileNotFoundError):
            await sandbox.read_file("/workspace/nope.txt")

        source = write_tree(tmp_path / "src", {"one.txt": "1", "sub/two.bin": bytes(range(256))})
        await sandbox.upload_dir(source, "/data/in")
        listing = await sandbox.exec("cd /data/in && find . -type f | sort && cat one.txt")
        assert listing.stdout == "./one.txt\n./sub/two.bin\n1"

        await sandbox.exec("mkdir -p /data/out/x && echo made > /data/out/x/made.txt")
        target = tmp_path / "out"
        await sandbox.download_dir("/data/out", target)
        assert (target / "x" / "made.txt").read_text() == "made\n"
    finally:
        await sandbox.close()


async def test_snapshot_then_create_from_it(backend: SandboxBackend, owner: dict[str, str]) -> None:
    sandbox = await backend.create(spec(owner))
    name = f"contract-snap-{uuid.uuid4().hex[:8]}"
    try:
        await sandbox.exec(
            "mkdir -p /opt/tool && echo installed > /opt/tool/marker && rm -f /etc/issue"
        )
        info = await sandbox.snapshot(name)
    finally:
        await sandbox.close()
    assert info.name == name and info.backend == backend.name
    try:
        assert name in [s.name for s in await backend.snapshots.all()]
        child = await backend.create(spec(owner, image=info.image))
        try:
            seen = await child.exec("cat /opt/tool/marker; test -e /etc/issue && echo still-there")
            assert seen.stdout == "installed\n"
        finally:
            await child.close()
    finally:
        await backend.snapshots.delete(name)
    assert name not in [s.name for s in await backend.snapshots.all()]


async def test_warm_pool_hands_out_live_sandboxes(
    backend: SandboxBackend, owner: dict[str, str]
) -> None:
    pool = WarmPool(backend, spec(owner), size=2, handle_sigterm=False)
    await pool.start(wait=True)
    try:
        first, second = await pool.acquire(), await pool.acquire()
        assert first.id != second.id
        assert pool.stats.handed_out == 2 and pool.stats.cold == 0
        for sandbox in (first, second):
            assert await sandbox.is_alive()
            assert (await sandbox.exec("echo up")).stdout == "up\n"
            await sandbox.close()
        await pool.wait_ready(timeout_s=60)
        assert pool.ready == 2
    finally:
        await pool.close()
    assert pool.ready == 0
    assert await backend.sandboxes(owner) == []


async def test_close_is_idempotent_and_final(
    backend: SandboxBackend, owner: dict[str, str]
) -> None:
    sandbox = await backend.create(spec(owner))
    await sandbox.exec("sleep 303 > /dev/null 2>&1 &")
    assert [s.id for s in await backend.sandboxes(owner)] == [sandbox.id]
    await sandbox.close()
    await sandbox.close()
    assert not await sandbox.is_alive()
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")
    assert await backend.sandboxes(owner) == []


async def test_reap_closes_by_owner(backend: SandboxBackend, owner: dict[str, str]) -> None:
    other = {OWNER_LABEL: f"other-{uuid.uuid4().hex[:8]}"}
    mine = [await backend.create(spec(owner)) for _ in range(2)]
    theirs = await backend.create(spec(other))
    try:
        reaped = await backend.reap(owner)
        assert sorted(reaped) == sorted(s.id for s in mine)
        assert await backend.sandboxes(owner) == []
        assert [s.id for s in await backend.sandboxes(other)] == [theirs.id]
        assert await theirs.is_alive()
    finally:
        await theirs.close()
        for sandbox in mine:
            await sandbox.close()
