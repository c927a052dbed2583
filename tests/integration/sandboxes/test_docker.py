"""The docker backend against a real dockerd (``--bridge=none --iptables=false``):
isolation, limits, timeouts, output cap, files, snapshots, reaping and image builds."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rllm.sandboxes.docker.backend import DockerBackend
from rllm.sandboxes.docker.images import from_images, substitute_from
from rllm.sandboxes.docker.layers import write_flat_tar
from rllm.sandboxes.docker.sandbox import DockerSandbox
from rllm.sandboxes.errors import (
    ImageError,
    SandboxClosedError,
    SandboxError,
    SandboxUnavailableError,
    SnapshotError,
)
from rllm.sandboxes.images.store import LocalImage
from rllm.sandboxes.registry import get_backend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import OWNER_LABEL, NetworkMode, SandboxSpec
from tests.integration.sandboxes.docker_fixtures import docker_backend_settings, docker_url
from tests.integration.sandboxes.trees import write_tree

__all__ = ["docker_backend_settings", "docker_url"]  # fixtures, re-exported for pytest

pytestmark = pytest.mark.integration

_PROCS = 'for d in /proc/[0-9]*; do tr "\\0" " " <"$d/cmdline" 2>/dev/null; echo; done'


async def _until_running(sandbox: DockerSandbox, command: str, timeout_s: float = 30) -> None:
    """Wait until a process whose command line is ``command`` runs in the sandbox."""
    deadline = time.monotonic() + timeout_s
    while command not in [line.strip() for line in (await sandbox.exec(_PROCS)).stdout.split("\n")]:
        assert time.monotonic() < deadline, f"{command!r} never started in the sandbox"
        await asyncio.sleep(0.05)


@pytest.fixture
async def backend(
    sandbox_settings: SandboxSettings, docker_backend_settings: dict[str, object]
) -> AsyncIterator[DockerBackend]:
    """A docker backend of one test; everything it created is closed after the test."""
    found = get_backend("docker", sandbox_settings.model_copy(update=docker_backend_settings))
    assert isinstance(found, DockerBackend)
    yield found
    await found.aclose()


@pytest.fixture
def owner() -> str:
    """A run id of this test only."""
    return f"test-{uuid.uuid4().hex[:12]}"


async def _sandbox(backend: DockerBackend, owner: str, **spec: Any) -> DockerSandbox:
    return await backend.create(SandboxSpec(labels={OWNER_LABEL: owner}, **spec))


async def test_exec_result_env_cwd_user_stdin(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner, env={"A": "from-spec"})
    failed = await sandbox.exec("echo out; echo err >&2; exit 7")
    assert (failed.stdout, failed.stderr, failed.exit_code, failed.timed_out) == (
        "out\n",
        "err\n",
        7,
        False,
    )
    shown = await sandbox.exec(
        'echo "$A $B $(pwd) $(id -u)"', env={"B": "b"}, cwd="/tmp", user="65534"
    )
    assert shown.stdout == "from-spec b /tmp 65534\n"
    assert (await sandbox.exec(["pwd"])).stdout == "/workspace\n"
    echoed = await sandbox.exec(["sh", "-c", "tr a-z A-Z"], stdin="hello\nworld")
    assert echoed.stdout == "HELLO\nWORLD"
    assert (await sandbox.exec("ls /tmp")).stdout == ""  # the stdin file is gone


async def test_cannot_write_outside_its_root(
    backend: DockerBackend, owner: str, tmp_path: Path
) -> None:
    host_file = tmp_path / "host.txt"
    host_file.write_text("host data")
    sandbox = await _sandbox(backend, owner)
    result = await sandbox.exec(f"cat {host_file}; mkdir -p {tmp_path} && echo pwned > {host_file}")
    assert "host data" not in result.stdout
    assert (await sandbox.read_file(str(host_file))) == b"pwned\n"  # its own copy only
    assert host_file.read_text() == "host data"


async def test_cannot_see_host_processes(backend: DockerBackend, owner: str) -> None:
    marker = f"rllm-host-marker-{uuid.uuid4().hex}"
    host = subprocess.Popen(["sh", "-c", f"exec -a {marker} sleep 60"])
    try:
        sandbox = await _sandbox(backend, owner)
        listing = (await sandbox.exec(_PROCS)).stdout
        assert marker not in listing
        assert "sleep" in listing  # it does see its own keepalive
        assert len([line for line in listing.splitlines() if line.strip()]) < 8
    finally:
        host.kill()
        host.wait()


async def test_network_none_has_only_loopback(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    assert (await sandbox.exec("ls /sys/class/net")).stdout.split() == ["lo"]
    dev = (await sandbox.exec("tail -n +3 /proc/net/dev")).stdout
    assert [line.split(":")[0].strip() for line in dev.splitlines()] == ["lo"]


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.body  # type: ignore[attr-defined]  # the reply body, set on each server in http_servers
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def http_servers() -> Iterator[tuple[int, int]]:
    """Two loopback HTTP servers on the host: (gateway port, another port)."""
    servers = []
    for body in (b"gateway-ok", b"other-server"):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
        server.body = body  # type: ignore[attr-defined]  # the reply body _Hello sends
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield servers[0].server_address[1], servers[1].server_address[1]
    for server in servers:
        server.shutdown()
        server.server_close()


def _http_get(port: int) -> str:
    return (
        f"exec 3<>/dev/tcp/127.0.0.1/{port} || exit 9; "
        "printf 'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3; cat <&3"
    )


async def test_network_gateway_reaches_only_the_gateway(
    backend: DockerBackend, owner: str, http_servers: tuple[int, int]
) -> None:
    gateway, other = http_servers
    sandbox = await _sandbox(
        backend, owner, network=NetworkMode.GATEWAY, gateway_url=f"http://127.0.0.1:{gateway}"
    )
    reached = await sandbox.exec(["bash", "-c", _http_get(gateway)], timeout_s=20)
    assert reached.exit_code == 0, reached
    assert reached.stdout.endswith("gateway-ok")
    refused = await sandbox.exec(["bash", "-c", _http_get(other)], timeout_s=20)
    assert refused.exit_code != 0
    assert "other-server" not in refused.stdout
    assert (await sandbox.exec("ls /sys/class/net")).stdout.split() == ["lo"]


async def test_network_host_sees_the_host_loopback(
    backend: DockerBackend, owner: str, http_servers: tuple[int, int]
) -> None:
    sandbox = await _sandbox(backend, owner, network=NetworkMode.HOST)
    reached = await sandbox.exec(["bash", "-c", _http_get(http_servers[1])], timeout_s=20)
    assert reached.stdout.endswith("other-server")


async def test_killed_at_its_memory_limit(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner, memory_mb=64)
    result = await sandbox.exec(
        "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}", timeout_s=60
    )
    assert "survived" not in result.stdout
    assert result.exit_code == 137, result
    assert result.error is not None and "out-of-memory" in result.error
    assert (await sandbox.exec("echo still-here")).stdout == "still-here\n"
    assert await sandbox.is_alive()


async def test_timeout_kills_a_setsid_child(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    started = time.monotonic()
    result = await sandbox.exec(
        "setsid sh -c 'echo $$ > /tmp/child.pid; exec sleep 301' & sleep 302", timeout_s=1.5
    )
    assert time.monotonic() - started < 10
    assert (result.timed_out, result.exit_code) == (True, None)
    assert result.error is not None and "timed out" in result.error
    child = (await sandbox.exec("cat /tmp/child.pid")).stdout.strip()
    assert child.isdigit()
    assert (await sandbox.exec(f"test -d /proc/{child}")).exit_code == 1
    listing = (await sandbox.exec(_PROCS)).stdout
    assert "sleep 301" not in listing and "sleep 302" not in listing


async def test_output_is_capped_with_a_marker(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner, output_limit_bytes=4096)
    result = await sandbox.exec("head -c 100000 /dev/zero | tr '\\0' a; echo small >&2")
    assert result.truncated
    assert result.stdout.startswith("a" * 4096)
    assert result.stdout[4096:] == "\n[rllm: output cut, 95904 of 100000 bytes dropped]\n"
    assert result.stderr == "small\n"
    assert result.exit_code == 0


async def test_files_in_and_out(backend: DockerBackend, owner: str, tmp_path: Path) -> None:
    sandbox = await _sandbox(backend, owner)
    await sandbox.write_file("deep/dir/a.sh", "echo run\n", mode=0o755)
    assert (await sandbox.exec("./deep/dir/a.sh")).stdout == "run\n"
    assert await sandbox.read_file("/workspace/deep/dir/a.sh") == b"echo run\n"
    with pytest.raises(FileNotFoundError, match="nope"):
        await sandbox.read_file("nope")
    src = write_tree(tmp_path / "src", {"sub/f.txt": "in sub", "top.bin": bytes(range(256))})
    await sandbox.upload_dir(src, "/data/up")
    assert (await sandbox.exec("cat /data/up/sub/f.txt")).stdout == "in sub"
    await sandbox.exec(
        "cd /data/up && ln -s /etc/passwd abs && ln -s ../../etc/hostname rel && ln -s top.bin ok"
    )
    out = tmp_path / "out"
    await sandbox.download_dir("/data/up", out)
    assert (out / "sub" / "f.txt").read_text() == "in sub"
    assert (out / "top.bin").read_bytes() == bytes(range(256))
    assert os.readlink(out / "ok") == "top.bin"
    assert not (out / "abs").exists() and not (out / "abs").is_symlink()
    assert not (out / "rel").is_symlink()


async def test_snapshot_then_create_from_it(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    await sandbox.write_file("state.txt", "prepared")
    await sandbox.exec("echo installed > /opt/tool")
    started = time.monotonic()
    info = await sandbox.snapshot(f"snap-{owner}")
    assert time.monotonic() - started < 10
    assert (info.backend, info.labels[OWNER_LABEL]) == ("docker", owner)
    assert [s.name for s in await backend.snapshots.all() if s.name == info.name] == [info.name]
    other_owner = f"{owner}-2"
    child = await _sandbox(backend, other_owner, image=info.image)
    assert await child.read_file("state.txt") == b"prepared"
    assert (await child.exec("cat /opt/tool")).stdout == "installed\n"
    # the image carries its source's labels; reaping the source's owner spares the child
    assert await backend.reap({OWNER_LABEL: owner}) == [sandbox.id]
    assert await child.is_alive()
    await child.close()
    await backend.snapshots.delete(info.name)
    assert info.name not in [s.name for s in await backend.snapshots.all()]
    with pytest.raises(SnapshotError, match=info.name):
        await backend.snapshots.delete(info.name)


async def test_close_leaves_no_container(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    assert [i.id for i in await backend.sandboxes({OWNER_LABEL: owner})] == [sandbox.id]
    await sandbox.close()
    await sandbox.close()
    assert await backend.sandboxes({OWNER_LABEL: owner}) == []
    assert backend.client.containers.list(all=True, filters={"id": sandbox.id}) == []
    assert not await sandbox.is_alive()
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")


async def test_died_mid_exec_is_a_result(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    running = asyncio.ensure_future(sandbox.exec("sleep 30", timeout_s=60))
    await _until_running(sandbox, "sleep 30")
    backend.client.api.kill(sandbox.id)
    result = await running
    assert result.exit_code is None
    assert result.error is not None and result.error.startswith("sandbox died")
    assert not await sandbox.is_alive()


async def test_reap_by_owner_finds_leaks_of_dead_processes(
    backend: DockerBackend, owner: str
) -> None:
    mine = [await _sandbox(backend, owner) for _ in range(2)]
    spared = await _sandbox(backend, f"{owner}-other")
    leak = (
        "import asyncio, os, sys\n"
        "from rllm.sandboxes.registry import get_backend\n"
        "from rllm.sandboxes.settings import SandboxSettings\n"
        "from rllm.sandboxes.types import SandboxSpec\n"
        "async def main():\n"
        f"    b = get_backend('docker', SandboxSettings(home={str(backend.settings.home)!r},"
        f" docker_url={backend.settings.docker_url!r}))\n"
        f"    s = await b.create(SandboxSpec(labels={{'rllm.owner': {owner!r}}}))\n"
        "    print(s.id, flush=True)\n"
        "    os._exit(0)\n"  # no finalizers: the container leaks
        "asyncio.run(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", leak], capture_output=True, text=True, timeout=120, check=False
    )
    leaked = proc.stdout.strip()
    assert proc.returncode == 0 and leaked, proc.stderr
    assert {i.id for i in await backend.sandboxes({OWNER_LABEL: owner})} == {
        *(s.id for s in mine),
        leaked,
    }
    assert await backend.reap({OWNER_LABEL: owner}, older_than_s=3600) == []
    assert set(await backend.reap({OWNER_LABEL: owner})) == {*(s.id for s in mine), leaked}
    assert await backend.sandboxes({OWNER_LABEL: owner}) == []
    assert await spared.is_alive()


async def test_unknown_image_is_refused_by_name(backend: DockerBackend, owner: str) -> None:
    with pytest.raises(ImageError, match=r"no-such-image:1\.0.*rllm-cli sandbox image import"):
        await _sandbox(backend, owner, image="no-such-image:1.0")


async def test_disk_limit_is_refused_not_ignored(backend: DockerBackend, owner: str) -> None:
    driver = backend.client.info()["Driver"]
    if driver != "overlay2":
        pytest.skip(f"this check is for overlay2 on a filesystem without quotas, not {driver}")
    with pytest.raises(SandboxError, match="disk_mb=64"):
        await _sandbox(backend, owner, disk_mb=64)
    assert await backend.sandboxes({OWNER_LABEL: owner}) == []


async def test_build_image_of_a_small_dockerfile(
    backend: DockerBackend, owner: str, tmp_path: Path
) -> None:
    (tmp_path / "hello.txt").write_text("copied in\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm\n"
        "COPY hello.txt /app/hello.txt\n"
        "RUN echo built > /app/built.txt\n"
        "ENV GREETING=hi-there\n"
        "WORKDIR /app\n"
    )
    name = f"rllm-test-build:{owner}"
    info = await backend.build_image(tmp_path, name)
    try:
        assert (info.name, info.backend) == (name, "docker")
        assert name in [i.name for i in await backend.images()]
        sandbox = await _sandbox(backend, owner, image=name)
        shown = await sandbox.exec("cat /app/hello.txt /app/built.txt; echo $GREETING", cwd="/app")
        assert shown.stdout == "copied in\nbuilt\nhi-there\n"
        (tmp_path / "Dockerfile").write_text(
            "FROM debian:bookworm\nRUN echo broken-step && exit 3\n"
        )
        with pytest.raises(ImageError, match="broken-step"):
            await backend.build_image(tmp_path, f"{name}-broken")
        (tmp_path / "Dockerfile").write_text("FROM nowhere/unknown:7\n")
        with pytest.raises(ImageError, match="nowhere/unknown:7"):
            await backend.build_image(tmp_path)
    finally:
        backend.client.images.remove(name, force=True)


async def test_spec_user_owns_the_workdir_and_written_files(
    backend: DockerBackend, owner: str
) -> None:
    sandbox = await _sandbox(backend, owner, user="nobody")
    await sandbox.write_file("mine.txt", "x")
    shown = await sandbox.exec("id -un; stat -c %U . mine.txt; echo more >> mine.txt && echo ok")
    assert shown.stdout == "nobody\nnobody\nnobody\nok\n"
    assert (await sandbox.exec(["cat"], stdin="piped")).stdout == "piped"
    assert (await sandbox.exec("ls -A /tmp/.rllm-stdin")).stdout == ""


async def test_cancelled_exec_kills_its_processes(backend: DockerBackend, owner: str) -> None:
    sandbox = await _sandbox(backend, owner)
    running = asyncio.ensure_future(sandbox.exec("setsid sleep 303 & sleep 304"))
    await _until_running(sandbox, "sleep 304")
    await _until_running(sandbox, "sleep 303")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    for _ in range(50):
        listing = (await sandbox.exec(_PROCS)).stdout
        if "sleep 303" not in listing and "sleep 304" not in listing:
            break
        await asyncio.sleep(0.1)
    assert "sleep 303" not in listing and "sleep 304" not in listing


def test_unreachable_daemon_names_the_socket_and_how_to_start(tmp_path: Path) -> None:
    socket = tmp_path / "no-dockerd.sock"
    settings = SandboxSettings(home=tmp_path, docker_url=f"unix://{socket}")
    with pytest.raises(SandboxUnavailableError, match=r"no-dockerd\.sock.*infra/docker/start"):
        get_backend("docker", settings)


def test_layers_flatten_with_whiteouts_and_opaque_dirs(tmp_path: Path) -> None:
    lower, upper = tmp_path / "lower", tmp_path / "upper"
    for path, text in {"keep": "low", "gone": "low", "dir/old": "low", "swap/x": "low"}.items():
        (lower / path).parent.mkdir(parents=True, exist_ok=True)
        (lower / path).write_text(text)
    (upper / "dir").mkdir(parents=True)
    (upper / "dir" / "new").write_text("up")
    os.setxattr(upper / "dir", "trusted.overlay.opaque", b"y")
    os.mknod(upper / "gone", 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    (upper / "swap").write_text("now a file")
    (upper / "keep2").write_text("up")
    buffer = io.BytesIO()
    write_flat_tar([lower, upper], buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}  # type: ignore[union-attr]  # regular members always have a file object
    assert files == {"keep": b"low", "keep2": b"up", "dir/new": b"up", "swap": b"now a file"}


def test_from_images_skips_stages_and_scratch() -> None:
    dockerfile = (
        "ARG X=1\nFROM --platform=linux/amd64 debian:bookworm AS build\nRUN true\n"
        "FROM build\nFROM scratch\nfrom python:3.11-slim\nCOPY --from=build / /\n"
    )
    assert from_images(dockerfile) == ["debian:bookworm", "python:3.11-slim"]


def test_substitute_from_rewrites_only_the_from_images_named() -> None:
    dockerfile = (
        "FROM --platform=linux/amd64 ubuntu:24.04 AS build\r\nRUN echo ubuntu:24.04\n"
        "FROM build\nfrom python:3.11-slim\nFROM ubuntu:22.04\n"
    )
    assert substitute_from(dockerfile, {"ubuntu:24.04": "debian:trixie"}) == (
        "FROM --platform=linux/amd64 debian:trixie AS build\r\nRUN echo ubuntu:24.04\n"
        "FROM build\nfrom python:3.11-slim\nFROM ubuntu:22.04\n"
    )


def test_missing_sdk_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    settings = SandboxSettings(home=tmp_path, docker_url="unix:///var/run/docker.sock")
    with pytest.raises(SandboxUnavailableError, match=r"pip install 'rllm-stream\[sandboxes\]'"):
        get_backend("docker", settings)


async def test_image_from_a_rootfs_directory(
    backend: DockerBackend, owner: str, base_image: LocalImage, tmp_path: Path
) -> None:
    base = base_image.layers[0]
    rootfs = tmp_path / "rootfs"
    wanted = [
        "usr/bin/dash",
        "usr/bin/sleep",
        "usr/bin/cat",
        "usr/lib/x86_64-linux-gnu/libc.so.6",
        "usr/lib64/ld-linux-x86-64.so.2",
    ]
    if not all((base / path).exists() for path in wanted):
        pytest.skip("this check copies x86_64 Debian binaries out of the base image")
    for path in wanted:
        (rootfs / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(base / path, rootfs / path)
    (rootfs / "usr/bin/sh").symlink_to("dash")
    for link in ("bin", "lib", "lib64"):
        (rootfs / link).symlink_to(f"usr/{link}")
    (rootfs / "marker.txt").write_text("from my rootfs\n")
    sandbox = await _sandbox(backend, owner, image=str(rootfs), workdir="/")
    assert (await sandbox.exec("cat /marker.txt")).stdout == "from my rootfs\n"
    info = next(i for i in await backend.sandboxes({OWNER_LABEL: owner}))
    assert info.image == str(rootfs)
