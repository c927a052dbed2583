"""Images of the docker backend: local-store images imported into the daemon with
``docker import`` (no registry is reachable), and Dockerfiles built by docker's own
builder on top of them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rllm.sandboxes.docker.client import docker_errors
from rllm.sandboxes.docker.layers import write_flat_tar
from rllm.sandboxes.errors import ImageError, PullError
from rllm.sandboxes.images.base import BASE_IMAGES, ensure_base
from rllm.sandboxes.images.pull import pull_sources
from rllm.sandboxes.images.reference import parse_reference
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL, substitute
from rllm.sandboxes.images.store import ImageConfig, ImageStore
from rllm.sandboxes.settings import PullPolicy, SandboxSettings
from rllm.sandboxes.types import BACKEND_LABEL, ImageInfo

__all__ = ["LOCAL_ID_LABEL", "build_image", "ensure_image", "from_images", "list_images"]

LOCAL_ID_LABEL = "rllm.local-id"
"""On an imported image: the local store's content id it was imported from."""

_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)
_import_lock = threading.Lock()


def _changes(config: ImageConfig, labels: dict[str, str]) -> list[str]:
    changes = [f"ENV {key}={json.dumps(value)}" for key, value in config.env.items()]
    if config.workdir:
        changes.append(f"WORKDIR {config.workdir}")
    if config.user:
        changes.append(f"USER {config.user}")
    changes += [f"LABEL {json.dumps(k)}={json.dumps(v)}" for k, v in labels.items()]
    return changes


def _docker_image(client: Any, name: str) -> Any | None:
    import docker  # type: ignore[import-untyped]  # the SDK ships no type hints

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def _import(client: Any, tag: str, layers: list[Path], changes: list[str]) -> None:
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        with open(write_fd, "wb", buffering=1 << 20) as out:
            try:
                write_flat_tar(layers, out)
            except BaseException as exc:
                failure.append(exc)

    writer = threading.Thread(target=produce, name=f"docker-import-{tag}", daemon=True)
    writer.start()
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
    with open(read_fd, "rb", buffering=1 << 20) as src, docker_errors(f"docker import {tag}"):
        client.api.import_image(
            src=src,
            repository=repository,
            tag=version or "latest",
            changes=changes,
            stream_src=True,
        )
    writer.join()
    if failure:
        raise ImageError(f"could not read the layers of {tag!r}: {failure[0]}") from failure[0]


def _pull(client: Any, name: str, settings: SandboxSettings) -> Any | None:
    """Let dockerd pull ``name`` (linux/amd64), through the mirror for Docker Hub names
    (pulled as ``mirror/library/x`` and tagged as the Docker Hub name); None when the
    registry cannot be reached.

    Raises:
        PullError: the registry answered but has no such image, or refused it.
    """
    import docker

    try:
        ref = parse_reference(name)
    except ValueError:
        return None
    failures: list[str] = []
    unreachable = True
    for source in pull_sources(ref, settings):
        repository = source.familiar.partition("@")[0]
        if source.tag:
            repository = repository[: -len(source.tag) - 1]
        try:
            client.api.pull(repository, tag=source.digest or source.tag, platform="linux/amd64")
        except docker.errors.APIError as exc:
            text = str(exc).lower()
            if not any(w in text for w in ("connection refused", "no such host", "timeout")):
                unreachable = False
            failures.append(f"{source.registry}: {exc}")
            continue
        if source is not ref and ref.tag:  # the mirror's copy under the Docker Hub name
            pulled = client.images.get(f"{repository}:{ref.tag}")
            pulled.tag(ref.repository.removeprefix("library/"), tag=ref.tag)
        return client.images.get(ref.familiar)
    if unreachable:
        return None
    raise PullError(f"dockerd could not pull {ref}: " + "; ".join(failures))


def ensure_image(
    client: Any, store: ImageStore, name: str, settings: SandboxSettings | None = None
) -> str:
    """The daemon's tag for ``name``: a docker image it has (pulled by dockerd per the
    pull policy), else the local image store's image (or a base image, built by
    debootstrap) imported as that tag, else an absolute path to a root filesystem
    directory, imported as ``rllm-rootfs:<hash>``.

    Raises:
        ImageError: no store knows ``name``; ``PullError`` when its registry refused it.
    """
    if name.startswith("/"):
        return _ensure_rootfs(client, Path(name))
    settings = settings or SandboxSettings()
    with _import_lock:
        found = _docker_image(client, name)
        local = store.find(name)
        policy = settings.pull_policy
        wants_pull = found is None if policy == PullPolicy.MISSING else policy == PullPolicy.ALWAYS
        if local is None and wants_pull:
            with docker_errors(f"docker pull {name}"):
                found = _pull(client, name, settings) or found
        if local is None and found is None and name in BASE_IMAGES:
            local = ensure_base(store, name)
        if found is not None and (
            local is None or found.labels.get(LOCAL_ID_LABEL) in (None, local.id)
        ):
            return name
        if local is None:
            raise ImageError(
                f"image {name!r} is neither in the Docker daemon nor in the local image store "
                f"{store.root}; build it with `rllm-cli sandbox image build DIR`, or import a "
                f"root filesystem with `rllm-cli sandbox image import {name} ROOTFS.tar`"
            )
        labels = {BACKEND_LABEL: "docker", LOCAL_ID_LABEL: local.id}
        _import(client, name, list(local.layers), _changes(local.config, labels))
    return name


def _ensure_rootfs(client: Any, rootfs: Path) -> str:
    if not rootfs.is_dir():
        raise ImageError(f"image {str(rootfs)!r} is not a root filesystem directory on this host")
    stamp = f"{rootfs.resolve()}:{rootfs.stat().st_mtime_ns}"
    tag = f"rllm-rootfs:{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"
    with _import_lock:
        if _docker_image(client, tag) is None:
            _import(client, tag, [rootfs], _changes(ImageConfig(), {BACKEND_LABEL: "docker"}))
    return tag


def from_images(dockerfile: str) -> list[str]:
    """Images the ``FROM`` lines of a Dockerfile name (not earlier stages, not scratch)."""
    stages: set[str] = set()
    wanted: list[str] = []
    for line in dockerfile.replace("\\\n", " ").splitlines():
        match = _FROM.match(line)
        if match is None:
            continue
        image, alias = match.group(1), match.group(2)
        known = image.lower() in stages or image == "scratch" or "$" in image
        if not known and image not in wanted:
            wanted.append(image)
        if alias:
            stages.add(alias.lower())
    return wanted


def _context_hash(context_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in context_dir.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(context_dir).as_posix()
        digest.update(f"{rel}\0{path.lstat().st_mode}\0".encode())
        digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    return digest.hexdigest()[:16]


def build_image(
    client: Any,
    store: ImageStore,
    context_dir: Path,
    name: str | None,
    settings: SandboxSettings | None = None,
) -> ImageInfo:
    """Build ``context_dir/Dockerfile`` with docker's builder (host network, no pull) after
    making sure its ``FROM`` images are in the daemon; a ``FROM`` with a substitute in
    ``settings.image_substitutes`` is built on it (a WARNING, the label
    ``rllm.substituted-from``), as the local builder does.

    Raises:
        ImageError: no Dockerfile, an unknown ``FROM``, or a failed step (with its output).
    """
    dockerfile = context_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise ImageError(f"no Dockerfile in {context_dir}; build_image needs DIR/Dockerfile")
    text = dockerfile.read_text(encoding="utf-8")
    substitutes = settings.image_substitutes if settings is not None else {}
    used: dict[str, str] = {}
    for image in from_images(text):
        base, asked = substitute(image, substitutes)
        if asked is not None:
            used[image] = base
        ensure_image(client, store, base, settings)
    tag = name or f"rllm-build:{_context_hash(context_dir)}"
    labels = {BACKEND_LABEL: "docker"}
    output: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rllm-dockerfile-") as spare:
        dockerfile_arg = None
        if used:  # the builder reads a rewritten copy, outside the context; the context stays
            labels[SUBSTITUTED_LABEL] = ",".join(used)
            rewritten = Path(spare) / "Dockerfile"
            rewritten.write_text(substitute_from(text, used), encoding="utf-8")
            dockerfile_arg = str(rewritten)
        with docker_errors(f"docker build {context_dir}", image=tag):
            for chunk in client.api.build(
                path=str(context_dir),
                dockerfile=dockerfile_arg,
                tag=tag,
                network_mode="host",
                pull=False,
                rm=True,
                forcerm=True,
                decode=True,
                labels=labels,
            ):
                output.extend(str(chunk.get("stream", "")).splitlines())
                if "error" in chunk:
                    tail = "\n".join(line for line in output[-20:] if line.strip())
                    raise ImageError(f"building {context_dir} failed: {chunk['error']}\n{tail}")
            return image_info(client.images.get(tag), tag)


def substitute_from(dockerfile: str, used: dict[str, str]) -> str:
    """``dockerfile`` with each ``FROM`` image in ``used`` (asked-for -> substitute)
    replaced by its substitute; every other line as written."""
    lines = dockerfile.splitlines(keepends=True)
    for i, line in enumerate(lines):
        match = _FROM.match(line.rstrip("\r\n"))
        if match is not None and match.group(1) in used:
            start, end = match.span(1)
            lines[i] = line[:start] + used[match.group(1)] + line[end:]
    return "".join(lines)


def image_info(image: Any, name: str) -> ImageInfo:
    """``ImageInfo`` of a docker SDK image under one of its tags."""
    created = image.attrs.get("Created")
    created_at = None
    if created:
        stamp = datetime.fromisoformat(created[:26].rstrip("Z")).replace(tzinfo=UTC)
        created_at = stamp.timestamp()
    return ImageInfo(
        name=name,
        backend="docker",
        id=str(image.id),
        size_bytes=image.attrs.get("Size"),
        created_at=created_at,
    )


def list_images(client: Any) -> list[ImageInfo]:
    """Images the backend made (imported, built, snapshots): those with ``rllm.backend``."""
    with docker_errors("listing images"):
        images = client.images.list(filters={"label": f"{BACKEND_LABEL}=docker"})
    infos = [image_info(image, tag) for image in images for tag in image.tags]
    return sorted(infos, key=lambda i: i.name)
