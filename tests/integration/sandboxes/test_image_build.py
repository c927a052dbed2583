"""Dockerfiles built by the local builder on the real local backend: files, env, workdir
and user of the result, the layer cache, a failing RUN, a derived image, an import."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tarfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rllm.sandboxes import ImageError, SandboxSettings, SandboxSpec, get_backend
from rllm.sandboxes.images.build import BUILD_LABEL, build_image
from rllm.sandboxes.images.importer import import_rootfs
from rllm.sandboxes.images.store import ImageStore, LocalImage

DOCKERFILE = """\
# syntax=docker/dockerfile:1
FROM debian:bookworm
ARG NONCE
ARG GREETING=hello
ENV MODE=test \\
    APP_HOME=/app
RUN useradd --uid 1000 --create-home app
WORKDIR $APP_HOME
COPY --chown=app:app hello.txt ./
RUN echo "$GREETING from $MODE" > made.txt && cat /proc/sys/kernel/random/uuid > stamp
USER app
WORKDIR /srv/data
WORKDIR /app
CMD ["cat", "made.txt"]
"""


PREFIX = "test-image-build-"
"""Every image these tests name starts so; they and their own layers go afterwards."""


class CountingBackend:
    """The local backend, counting the sandboxes it creates (one per RUN that runs) and
    recording the layers they commit."""

    def __init__(self, inner: Any, made: set[str]) -> None:
        self.inner, self.made, self.created = inner, made, 0
        self.name = inner.name

    async def create(self, spec: SandboxSpec) -> Any:
        self.created += 1
        self.made.add(spec.labels.get(BUILD_LABEL, ""))
        return await self.inner.create(spec)


class RecordingStore(ImageStore):
    """The shared image store, recording the layers committed through it."""

    def __init__(self, root: Path, made: set[str]) -> None:
        super().__init__(root)
        self.made = made

    def commit_layer(self, directory: Path, layer_id: str | None = None) -> str:
        layer = super().commit_layer(directory, layer_id)
        self.made.add(layer)
        return layer


@pytest.fixture
def made(sandbox_settings: SandboxSettings, base_image: LocalImage) -> Iterator[set[str]]:
    """Layers the test made; afterwards its images go, and those layers no other image
    uses (``python:3.11-slim`` and the base stay cached in the shared store)."""
    layers: set[str] = set()
    yield layers
    store = ImageStore(sandbox_settings.images_dir)
    for image in store.all():
        if image.name.startswith(PREFIX):
            store.delete(image.name)
    used = {layer.name for image in store.all() for layer in image.layers}
    for layer in layers - used - {""}:
        shutil.rmtree(store.layers_dir / layer, ignore_errors=True)


@pytest.fixture
async def backend(sandbox_settings: SandboxSettings, made: set[str]) -> AsyncIterator[Any]:
    local = get_backend("local", sandbox_settings)
    try:
        yield CountingBackend(local, made)
    finally:
        await local.aclose()
        await local.reap()


@pytest.fixture
def store(sandbox_settings: SandboxSettings, made: set[str]) -> ImageStore:
    return RecordingStore(sandbox_settings.images_dir, made)


async def run(backend: Any, image: str, cmd: str, **spec: Any) -> str:
    sandbox = await backend.inner.create(SandboxSpec(image=image, **spec))
    try:
        result = await sandbox.exec(cmd)
        assert result.ok, result
        return str(result.stdout).strip()
    finally:
        await sandbox.close()


async def test_build_then_run_and_rebuild_from_cache(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "hello.txt").write_text("hi there\n")
    name = f"{PREFIX}{uuid.uuid4().hex[:8]}"
    args = {"GREETING": "hey", "NONCE": uuid.uuid4().hex}
    started = time.monotonic()
    info = await build_image(backend, store, tmp_path, name, build_args=args)
    cold_s = time.monotonic() - started
    assert (info.name, info.backend) == (name, "local") and info.size_bytes
    image = store.get(name)
    assert image.config.workdir == "/app" and image.config.user == "app"
    assert image.config.env["MODE"] == "test" and "GREETING" not in image.config.env
    assert image.labels["rllm.dockerfile.cmd"] == '["cat", "made.txt"]'

    out = await run(
        backend,
        name,
        "pwd; id -un; echo $MODE; cat made.txt; stat -c '%U:%G %a' hello.txt /srv/data; "
        "cat hello.txt",
        workdir="/app",
    )
    assert out.splitlines() == [
        "/app",
        "app",
        "test",
        "hey from test",
        "app:app 644",
        "app:app 755",  # a WORKDIR made after USER belongs to that user, as in BuildKit
        "hi there",
    ]
    print(f"cold build {cold_s:.2f} s")
    stamp = await run(backend, name, "cat /app/stamp")

    created = backend.created
    assert created == 2  # one sandbox per RUN
    started = time.monotonic()
    again = await build_image(backend, store, tmp_path, name, build_args=args)
    cached_s = time.monotonic() - started
    assert again.id == info.id and backend.created == created  # nothing re-ran
    assert cached_s < 1.0, f"cached rebuild took {cached_s:.2f} s (cold {cold_s:.2f} s)"
    print(f"cached rebuild {cached_s:.2f} s")

    (tmp_path / "hello.txt").write_text("changed\n")  # re-runs from the COPY on
    changed = await build_image(backend, store, tmp_path, name, build_args=args)
    assert changed.id != info.id and backend.created == created + 1  # the useradd is cached
    hello, new_stamp = (await run(backend, name, "cat /app/hello.txt /app/stamp")).splitlines()
    assert hello == "changed" and new_stamp != stamp


async def test_a_run_as_a_user_can_write_tmp(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    """/tmp is the sticky, world-writable directory the image has (apt's _apt user and
    any USER write there: ``apt-get update`` fails without it)."""
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm\nUSER nobody\nRUN touch /tmp/probe && stat -c %a /tmp\n"
    )
    name = f"{PREFIX}tmp-{uuid.uuid4().hex[:8]}"
    await build_image(backend, store, tmp_path, name)


async def test_run_as_a_missing_user_names_its_line(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nUSER ghost\nRUN true\n")
    with pytest.raises(ImageError, match=r"RUN at .*Dockerfile:3 could not run: .*'ghost'"):
        await build_image(backend, store, tmp_path)


async def test_failing_run_names_its_line_and_output(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm\nENV X=1\nRUN echo visible-$X && echo to-stderr >&2 && exit 3\n"
    )
    with pytest.raises(ImageError) as caught:
        await build_image(backend, store, tmp_path)
    message = str(caught.value)
    assert f"RUN at {tmp_path / 'Dockerfile'}:3" in message and "exit code 3" in message
    assert "visible-1" in message and "to-stderr" in message
    assert not [i for i in store.all() if i.name.startswith("build/")]  # no intermediate left


@pytest.mark.slow
async def test_python_slim_is_built_from_debian(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    """Runs apt once per machine (the shared store keeps the image); fast afterwards."""
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim\nRUN python -c 'import venv, sys; print(sys.version)' > /v\n"
    )
    name = f"{PREFIX}py-{uuid.uuid4().hex[:8]}"
    await build_image(backend, store, tmp_path, name)
    out = await run(backend, name, "python --version; pip --version; cat /v")
    assert out.startswith("Python 3.11."), out
    assert "python 3.11" in out.splitlines()[1]


async def test_import_rootfs_round_trip(
    backend: Any, store: ImageStore, base_image: LocalImage, tmp_path: Path
) -> None:
    """A tiny root filesystem (dash, cat, sleep, libc) as a tarball, imported, then run."""
    layer = base_image.layers[0]
    tarball = tmp_path / "rootfs.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for rel in (
            "bin",
            "lib",
            "lib64",
            "usr/bin/dash",
            "usr/bin/sh",
            "usr/bin/cat",
            "usr/bin/sleep",
            "usr/lib64/ld-linux-x86-64.so.2",
            "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            "usr/lib/x86_64-linux-gnu/libc.so.6",
        ):
            tar.add(layer / rel, arcname=rel, recursive=False)
        marker = tmp_path / "marker"
        marker.write_text("imported\n")
        info = tar.gettarinfo(str(marker), arcname="etc/marker")
        info.uid, info.gid = 4321, 4321
        with open(marker, "rb") as handle:
            tar.addfile(info, handle)
    name = f"{PREFIX}import-{uuid.uuid4().hex[:8]}"
    image = import_rootfs(store, name, tarball)
    assert store.get(name).id == image.id
    assert (image.layers[0] / "etc/marker").stat().st_uid == 4321
    assert await run(backend, name, "cat /etc/marker", workdir="/") == "imported"


async def test_run_steps_trust_the_build_ca_bundle(
    sandbox_settings: SandboxSettings, store: ImageStore, made: set[str], tmp_path: Path
) -> None:
    """pip over HTTPS in a RUN works through an egress that re-signs TLS (as here) once
    the host's bundle is given; the bundle and its variables stay out of the image."""
    bundle = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
    trusting = sandbox_settings.model_copy(update={"build_ca_bundle": bundle})
    local = get_backend("local", trusting)
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim\n"
        f"RUN echo {uuid.uuid4().hex} && pip install --no-deps --no-cache-dir six==1.16.0 "
        "&& python -c 'import six; print(six.__version__)' > /six\n"
    )
    name = f"{PREFIX}ca-{uuid.uuid4().hex[:8]}"
    try:
        await build_image(local, store, tmp_path, name)
        sandbox = await local.create(SandboxSpec(image=name))
        try:
            seen = await sandbox.exec(
                "cat /six; env | grep -c CA_BUNDLE; test -e /dev/rllm-build-ca.crt"
            )
            assert seen.stdout.split() == ["1.16.0", "0"] and seen.exit_code == 1, seen
        finally:
            await sandbox.close()
    finally:
        await local.aclose()


@pytest.mark.slow
async def test_copy_from_a_uv_image_takes_its_binaries_from_the_release_wheel(
    sandbox_settings: SandboxSettings, store: ImageStore, tmp_path: Path
) -> None:
    """Two TB2 tasks ``COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/``: with no
    registry reachable the image is built once from that release's wheel (the shared store
    keeps it), and the binaries copied report that version."""
    bundle = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
    trusting = sandbox_settings.model_copy(update={"build_ca_bundle": bundle})
    local = get_backend("local", trusting)
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm\n"
        "COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/\n"
        "RUN uv --version > /versions && uvx --version >> /versions\n"
    )
    name = f"{PREFIX}uv-{uuid.uuid4().hex[:8]}"
    try:
        await build_image(local, store, tmp_path, name)
        assert store.find("ghcr.io/astral-sh/uv:0.8.14") is not None
        sandbox = await local.create(SandboxSpec(image=name))
        try:
            seen = await sandbox.exec("cat /versions; ls /bin/uv /bin/uvx")
            assert seen.ok, seen
            lines = seen.stdout.split("\n")
            assert lines == ["uv 0.8.14", "uvx 0.8.14", "/bin/uv", "/bin/uvx", ""], seen.stdout
        finally:
            await sandbox.close()
    finally:
        await local.aclose()


MULTI_STAGE = """\
ARG BASE=debian:bookworm
FROM ${BASE} AS Build
ARG WHO=stage
RUN <<EOF
mkdir -p /out && echo "built by $WHO" > /out/made.txt
useradd --uid 1234 maker && chown maker /out/made.txt
EOF
RUN <<EOF
#!/bin/sh
echo "shebang ran as $(id -u)" > /out/shebang.txt
EOF
FROM ${BASE} AS unused
RUN exit 7
FROM ${BASE}
ENV GREETING=hello
SHELL ["/bin/bash", "-c"]
COPY --from=build /out/ /app/
COPY --from=0 --chmod=600 /out/made.txt /app/copied.txt
COPY <<EOF /app/config.txt
greeting=$GREETING
EOF
COPY <<-'RAW' /app/raw.txt
\tliteral $GREETING
\tRAW
RUN cat <<-EOF > /app/heredoc.txt && echo "bash $BASH_VERSINFO" >> /app/heredoc.txt
\trun $GREETING
\tEOF
ADD --chmod=644 {url} /app/
"""


async def test_multi_stage_heredocs_and_add_url(
    backend: Any, store: ImageStore, tmp_path: Path
) -> None:
    """Only the final stage and what it copies from are built; heredocs in RUN (script,
    shebang, inline) and COPY; ADD of a URL downloads on the host."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "remote.txt").write_text("from the server\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    name = f"{PREFIX}multi-{uuid.uuid4().hex[:8]}"
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/remote.txt"
        (tmp_path / "Dockerfile").write_text(MULTI_STAGE.replace("{url}", url))
        await build_image(backend, store, tmp_path, name)
    finally:
        server.shutdown()
        server.server_close()
    assert backend.created == 3  # two RUNs of the build stage, one of the final; none of unused
    out = await run(
        backend,
        name,
        "cd /app && stat -c '%n %u %a' made.txt copied.txt remote.txt && "
        "cat made.txt shebang.txt config.txt raw.txt heredoc.txt remote.txt",
        workdir="/",
    )
    assert out.splitlines() == [
        "made.txt 1234 644",  # COPY --from keeps the owner
        "copied.txt 1234 600",
        "remote.txt 0 644",
        "built by stage",
        "shebang ran as 0",
        "greeting=hello",
        "literal $GREETING",
        "run hello",
        "bash 5",
        "from the server",
    ]
    assert store.get(name).labels["rllm.dockerfile.shell"] == '["/bin/bash", "-c"]'
