"""A real registry on loopback (Debian's ``docker-registry``) with images pushed into it,
written here as OCI layouts from a tiny root filesystem (the host's dash, coreutils and the
libraries they link), so no registry outside is needed.

Images pushed (``REPOSITORIES``):

- ``library/python:3.13-slim-bookworm``: what a Docker Hub name is pulled as through the
  mirror setting;
- ``some/image:tag``: pulled by ``127.0.0.1:PORT/some/image:tag`` directly;
- ``some/arm:tag``: the same content claiming linux/arm64;
- ``some/corrupt:tag``: one whose top layer blob is then overwritten in the registry's
  storage (a digest mismatch).

Each has three layers: the root filesystem, a layer that deletes ``/etc/gone`` (an OCI
``.wh.`` whiteout) and replaces ``/opt/old`` (an opaque directory), and a marker file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["LoopbackRegistry", "loopback_registry"]

_TOOLS = ("dash", "cat", "ls", "rm", "mkdir", "echo", "id", "env", "touch", "sleep")
REPOSITORIES = (
    "library/python:3.13-slim-bookworm",
    "some/image:tag",
    "some/arm:tag",
    "some/corrupt:tag",
)


@dataclass(frozen=True)
class LoopbackRegistry:
    """A running registry and where it keeps its blobs."""

    host: str
    """``127.0.0.1:PORT``."""
    storage: Path
    """Its filesystem storage root."""
    layer_digests: dict[str, list[str]]
    """Repository:tag -> its layers' digests, bottom first."""

    def blob(self, digest: str) -> Path:
        """The file a blob is stored in."""
        hexdigest = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _mini_rootfs(root: Path) -> None:
    """dash as /bin/sh, a few coreutils, and the libraries they link (ldd)."""
    for name in ("bin", "etc/gone.d", "opt/old", "tmp", "usr/lib"):
        (root / name).mkdir(parents=True, exist_ok=True)
    needed: set[str] = set()
    for tool in _TOOLS:
        path = shutil.which(tool)
        assert path is not None, tool
        shutil.copy2(path, root / "bin" / tool)
        for line in _run("ldd", path).splitlines():
            parts = line.split()
            lib = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if lib.startswith("/"):
                needed.add(lib)
    for lib in needed:
        target = root / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, target)
    (root / "bin/sh").symlink_to("dash")
    (root / "etc/gone").write_text("deleted by the second layer\n")
    (root / "opt/old/stale").write_text("hidden by the opaque directory\n")
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"
    )
    (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")


def _tar_layer(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def _entry(
    name: str, data: bytes | None = None, kind: bytes = tarfile.REGTYPE
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if data is not None else 0
    return info, data


def _rootfs_layer(root: Path) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return raw.getvalue()


class _Layout:
    """An OCI image layout written by hand (umoci 0.4.7's ``insert`` leaves its layer tars
    without their last blocks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "blobs/sha256").mkdir(parents=True)
        (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        self.manifests: list[dict[str, object]] = []

    def blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (self.path / "blobs/sha256" / digest).write_bytes(data)
        return f"sha256:{digest}"

    def image(self, tag: str, layers: list[bytes], arch: str = "amd64") -> None:
        config = {
            "architecture": arch,
            "os": "linux",
            "config": {
                "Env": ["PATH=/bin:/usr/bin", "PYTHON_VERSION=3.13.0"],
                "WorkingDir": "/opt",
                "Cmd": ["python3"],
                "Labels": {"org.example": "yes"},
            },
            "rootfs": {
                "type": "layers",
                "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers],
            },
        }
        compressed = [gzip.compress(layer, mtime=0) for layer in layers]
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": self._descriptor(
                "application/vnd.oci.image.config.v1+json", json.dumps(config).encode()
            ),
            "layers": [
                self._descriptor("application/vnd.oci.image.layer.v1.tar+gzip", blob)
                for blob in compressed
            ],
        }
        descriptor = self._descriptor(
            "application/vnd.oci.image.manifest.v1+json", json.dumps(manifest).encode()
        )
        descriptor["annotations"] = {"org.opencontainers.image.ref.name": tag}
        self.manifests.append(descriptor)
        (self.path / "index.json").write_text(
            json.dumps({"schemaVersion": 2, "manifests": self.manifests})
        )

    def _descriptor(self, media_type: str, data: bytes) -> dict[str, object]:
        return {"mediaType": media_type, "digest": self.blob(data), "size": len(data)}


def _build_layout(work: Path) -> Path:
    rootfs = work / "rootfs"
    _mini_rootfs(rootfs)
    base = _rootfs_layer(rootfs)
    whiteout = _tar_layer([_entry("etc/.wh.gone", b"")])
    opaque = _tar_layer(
        [
            _entry("opt/old", kind=tarfile.DIRTYPE),
            _entry("opt/old/.wh..wh..opq", b""),
            _entry("opt/old/kept", b"in the opaque directory\n"),
        ]
    )
    marker = _tar_layer([_entry("marker", b"pulled from the loopback registry\n")])
    unique = _tar_layer([_entry("unique", f"only in some/corrupt {time.time_ns()}\n".encode())])
    layout = _Layout(work / "layout")
    layers = [base, whiteout, opaque, marker]
    layout.image("base", layers)
    layout.image("arm", layers, arch="arm64")
    layout.image("corrupt", [*layers, unique])
    return layout.path


@pytest.fixture(scope="session")
def loopback_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRegistry]:
    """A registry on 127.0.0.1 with ``REPOSITORIES`` pushed; stopped at the end."""
    for tool in ("docker-registry", "skopeo"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install -y {tool})")
    work = tmp_path_factory.mktemp("registry")
    storage = work / "storage"
    port = _free_port()
    config = work / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(work / "registry.log", "wb")  # noqa: SIM115  # closed at the end
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
    host = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"docker-registry did not start: {work}/registry.log"
                    ) from None
                time.sleep(0.1)
        layout = _build_layout(work)
        digests: dict[str, list[str]] = {}
        for repository in REPOSITORIES:
            tag = repository.partition("/")[2].partition(":")[0]
            tag = tag if tag in ("arm", "corrupt") else "base"
            _run(
                "skopeo",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
                f"oci:{layout}:{tag}",
                f"docker://{host}/{repository}",
            )
            raw = _run("skopeo", "inspect", "--tls-verify=false", f"docker://{host}/{repository}")
            digests[repository] = list(json.loads(raw)["Layers"])
        yield LoopbackRegistry(host, storage, digests)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
