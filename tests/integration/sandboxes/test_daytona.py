"""The daytona backend through the real ``daytona`` SDK against the HTTP fake of Daytona's
API and toolbox (``tests/fakes_sandboxes/daytona.py``) on a loopback port; every fake
sandbox is a real local sandbox, so results are real."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from daytona import AsyncDaytona, DaytonaConfig, DaytonaTimeoutError
from pydantic import SecretStr

from rllm.sandboxes.daytona.backend import DaytonaBackend
from rllm.sandboxes.errors import ImageError, SandboxClosedError, SandboxUnavailableError
from rllm.sandboxes.registry import get_backend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.snapshots import SnapshotRegistry
from rllm.sandboxes.types import OWNER_LABEL, Mount, NetworkMode, SandboxSpec, cut_output
from tests.fakes_sandboxes import daytona_fake
from tests.fakes_sandboxes.daytona import DEFAULT_EXEC_TIMEOUT_S, FAKE_API_KEY, FakeDaytona
from tests.integration.sandboxes.hosted_checks import (
    build_and_start,
    close_twice,
    exec_env_and_cwd,
    refuse,
)
from tests.integration.sandboxes.trees import write_tree

Pair = tuple[DaytonaBackend, FakeDaytona]


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No name but the loopback resolves: the SDK can never reach Daytona's real hosts."""
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in ("127.0.0.1", "localhost", "::1", None):
            raise OSError(f"test refused to resolve {host!r}: only the loopback fake exists")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)


def _bodies(fake: FakeDaytona, method: str, suffix: str) -> list[dict[str, object]]:
    return [b for m, p, b in fake.requests if m == method and p.endswith(suffix) and b]


async def test_exec_exit_codes_env_and_cwd(daytona: Pair) -> None:
    backend, fake = daytona
    sandbox, result = await exec_env_and_cwd(backend)
    assert not result.ok
    piped = await sandbox.exec(["tr", "a-z", "A-Z"], stdin="shout")
    assert piped.stdout == "SHOUT"
    missing = await sandbox.exec("no-such-command-here")
    assert missing.exit_code == 127 and "not found" in missing.stderr
    # every /process/execute carried a timeout: Daytona's default of 10 s never applies
    executes = _bodies(fake, "POST", "/process/execute")
    assert executes and all(isinstance(b["timeout"], int) and b["timeout"] > 10 for b in executes)


async def test_timeout_kills_the_tree(daytona: Pair) -> None:
    backend, _ = daytona
    sandbox = await backend.create(SandboxSpec())
    result = await sandbox.exec("(sleep 2; echo late > /tmp/late) & sleep 30", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert 0.9 <= result.duration_s < 6 and result.error == "timed out after 1 s"
    await asyncio.sleep(2.5)
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/tmp/late")


@pytest.mark.slow
async def test_commands_without_timeout_outlive_daytonas_default(daytona: Pair) -> None:
    backend, fake = daytona
    sandbox = await backend.create(SandboxSpec())
    result = await sandbox.exec(f"sleep {DEFAULT_EXEC_TIMEOUT_S + 1}; echo done")
    assert result.ok and result.stdout == "done\n"
    # the fake holds the service's default: a request without one is cut at 10 s (408)
    async with AsyncDaytona(DaytonaConfig(api_key=FAKE_API_KEY, api_url=f"{fake.url}/api")) as raw:
        remote = await raw.get(sandbox.id)
        with pytest.raises(DaytonaTimeoutError):
            await remote.process.exec(f"sleep {DEFAULT_EXEC_TIMEOUT_S + 2}")


async def test_output_is_cut_with_the_marker(daytona: Pair) -> None:
    backend, _ = daytona
    sandbox = await backend.create(SandboxSpec(output_limit_bytes=1024))
    result = await sandbox.exec("head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero >&2")
    assert result.truncated and result.ok
    assert result.stdout == cut_output(b"a" * 5000, 1024)
    assert result.stderr == cut_output(b"\0" * 3000, 1024)


async def test_files_in_and_out(daytona: Pair, tmp_path: Path) -> None:
    backend, _ = daytona
    sandbox = await backend.create(SandboxSpec())
    blob = bytes(range(256)) * 3
    await sandbox.write_file("/workspace/deep/er/blob.bin", blob, mode=0o600)
    assert await sandbox.read_file("/workspace/deep/er/blob.bin") == blob
    assert (await sandbox.exec("stat -c %a deep/er/blob.bin")).stdout == "600\n"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/workspace/absent")
    source = write_tree(tmp_path / "src", {"a.txt": "alpha", "sub/b.txt": "beta"})
    await sandbox.upload_dir(source, "/data/in")
    listing = await sandbox.exec("find /data/in -type f | sort; cat /data/in/sub/b.txt")
    assert listing.stdout == "/data/in/a.txt\n/data/in/sub/b.txt\nbeta"
    await sandbox.download_dir("/data/in", tmp_path / "back")
    assert (tmp_path / "back" / "a.txt").read_text() == "alpha"
    assert (tmp_path / "back" / "sub" / "b.txt").read_text() == "beta"


async def test_snapshot_then_create_from_it(
    daytona: Pair, sandbox_settings: SandboxSettings
) -> None:
    backend, fake = daytona
    first = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-snap"}))
    await first.write_file("/workspace/state.txt", "prepared")
    info = await first.snapshot("prepared-env")
    assert (info.name, info.backend, info.image) == ("prepared-env", "daytona", "prepared-env")
    assert [s.dto["name"] for s in fake.snapshots.values()] == ["prepared-env"]
    registered = SnapshotRegistry(sandbox_settings.snapshots_file).get("prepared-env")
    assert registered.backend == "daytona" and registered.labels == {OWNER_LABEL: "run-snap"}
    second = await backend.create(SandboxSpec(image=info.image))
    assert await second.read_file("/workspace/state.txt") == b"prepared"
    assert _bodies(fake, "POST", "/api/sandbox")[-1]["snapshot"] == "prepared-env"
    assert [i.name for i in await backend.snapshots.all()] == ["prepared-env"]
    assert "prepared-env" in [i.name for i in await backend.images()]
    await backend.snapshots.delete("prepared-env")
    assert fake.snapshots == {} and await backend.snapshots.all() == []


async def test_labels_and_reap(daytona: Pair) -> None:
    backend, fake = daytona
    a1 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-a"}))
    a2 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-a", "task": "t2"}))
    b1 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-b"}))
    listed = await backend.sandboxes({OWNER_LABEL: "run-a"})
    assert sorted(i.id for i in listed) == sorted([a1.id, a2.id])
    assert all(i.backend == "daytona" and i.image == "debian:bookworm" and i.alive for i in listed)
    assert [i.id for i in await backend.sandboxes({"task": "t2"})] == [a2.id]
    assert await backend.reap({OWNER_LABEL: "run-a"}, older_than_s=3600) == []
    assert sorted(await backend.reap({OWNER_LABEL: "run-a"})) == sorted([a1.id, a2.id])
    assert list(fake.sandboxes) == [b1.id]
    assert not await a1.is_alive() and await b1.is_alive()


async def test_reap_finds_sandboxes_of_another_process(
    daytona: Pair, sandbox_settings: SandboxSettings
) -> None:
    backend, fake = daytona
    leaked = await backend.create(SandboxSpec(labels={OWNER_LABEL: "dead-run"}))
    other = DaytonaBackend(backend.settings)
    try:
        assert await other.reap({OWNER_LABEL: "dead-run"}) == [leaked.id]
    finally:
        await other.aclose()
    assert fake.sandboxes == {}
    assert not await leaked.is_alive()


async def test_close_is_idempotent_and_leaves_nothing(daytona: Pair) -> None:
    backend, fake = daytona
    sandbox, engine = await close_twice(backend, fake)
    assert fake.sandboxes == {} and not await engine.is_alive()
    assert not await sandbox.is_alive()
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")
    await backend.create(SandboxSpec())
    await backend.aclose()
    assert fake.sandboxes == {}


async def test_spec_maps_onto_create_params(daytona: Pair) -> None:
    backend, fake = daytona
    boxed = await backend.create(SandboxSpec(cpus=2, memory_mb=2048, disk_mb=4096, lifetime_s=90))
    body = _bodies(fake, "POST", "/api/sandbox")[-1]
    assert (body["cpu"], body["memory"], body["disk"]) == (2, 2, 4)
    assert body["networkBlockAll"] is True and body["ttlMinutes"] == 2
    assert body["autoDeleteInterval"] == 0
    assert body["labels"] == {
        "rllm.backend": "daytona",
        "rllm.image": "debian:bookworm",
        "code-toolbox-language": "python",
    }
    await boxed.close()
    await backend.create(SandboxSpec(network=NetworkMode.HOST, lifetime_s=None))
    body = _bodies(fake, "POST", "/api/sandbox")[-1]
    assert body["networkBlockAll"] is False and body.get("ttlMinutes") is None


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            SandboxSpec(network=NetworkMode.GATEWAY, gateway_url="http://127.0.0.1:8400"),
            ["network='gateway'", "127.0.0.1:8400", "network='host'"],
        ),
        (SandboxSpec(cpus=1.5), ["cpus=1.5", "whole CPUs"]),
        (SandboxSpec(memory_mb=1500), ["memory_mb=1500", "2048"]),
        (SandboxSpec(pids=64), ["pids=64"]),
        (SandboxSpec(mounts=(Mount(source=Path("/usr"), target="/host-usr"),)), ["/usr"]),
        (SandboxSpec(image="/srv/rootfs"), ["/srv/rootfs", "local root filesystem"]),
    ],
)
async def test_what_daytona_cannot_honour_is_refused(
    daytona: Pair, spec: SandboxSpec, words: list[str]
) -> None:
    backend, fake = daytona
    await refuse(backend, spec, words)
    assert _bodies(fake, "POST", "/api/sandbox") == [] and fake.sandboxes == {}


async def test_user_runs_commands_as_that_user(daytona: Pair) -> None:
    backend, _ = daytona
    sandbox = await backend.create(SandboxSpec(user="65534"))
    assert (await sandbox.exec("id -u")).stdout == "65534\n"
    assert (await sandbox.exec("id -un", user="root")).stdout == "root\n"


async def test_build_image_into_a_snapshot(daytona: Pair, tmp_path: Path) -> None:
    backend, fake = daytona
    info = await build_and_start(backend, tmp_path)
    assert (info.name, info.backend) == ("task-image", "daytona")
    build = _bodies(fake, "POST", "/api/snapshots")[-1]["buildInfo"]
    assert isinstance(build, dict) and build["dockerfileContent"] == (
        "FROM debian:bookworm\nRUN echo built > /built.txt\n"
    )


async def test_build_contexts_are_refused_by_the_fake(daytona: Pair, tmp_path: Path) -> None:
    """The SDK uploads COPY sources to Daytona's object storage, which the fake has not."""
    backend, _ = daytona
    (tmp_path / "app.txt").write_text("x")
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nCOPY app.txt /app.txt\n")
    with pytest.raises(ImageError, match="object storage"):
        await backend.build_image(tmp_path, "with-context")


async def test_missing_or_refused_credentials(
    sandbox_settings: SandboxSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    monkeypatch.delenv("RLLM_SANDBOX_DAYTONA_API_KEY", raising=False)
    with pytest.raises(SandboxUnavailableError) as caught:
        get_backend("daytona", sandbox_settings)
    assert "RLLM_SANDBOX_DAYTONA_API_KEY" in str(caught.value)
    assert "DAYTONA_API_KEY" in str(caught.value)
    async with daytona_fake(sandbox_settings) as (good, _fake):
        wrong_key = "sk-wrong-" + "x" * 20
        settings = good.settings.model_copy(update={"daytona_api_key": SecretStr(wrong_key)})
        refused = DaytonaBackend(settings)
        try:
            with pytest.raises(SandboxUnavailableError) as caught:
                await refused.create(SandboxSpec())
        finally:
            await refused.aclose()
        assert "refused the API key" in str(caught.value)
        assert wrong_key not in str(caught.value) and wrong_key not in repr(caught.value)


async def test_unknown_image_is_an_image_error(daytona: Pair) -> None:
    backend, fake = daytona
    with pytest.raises(ImageError) as caught:
        await backend.create(SandboxSpec(image="no-such/image:1"))
    assert "no-such/image:1" in str(caught.value)
    assert fake.sandboxes == {}
