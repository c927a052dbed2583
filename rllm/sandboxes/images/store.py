"""The local image store: images as stacks of overlayfs layers on disk, no registry.

Layout under ``root`` (``$RLLM_HOME/sandboxes/images`` by default)::

    layers/<id>/              one layer: a directory tree in overlayfs "upper" format
                              (whiteouts are 0/0 character devices, opaque directories
                              carry trusted.overlay.opaque=y)
    manifests/<key>.json      one image: its name, layer ids bottom to top, and config

An image's id is the hash of its layer ids and config, so two names for the same content
share an id. Layers are never changed once written; creating a sandbox copies nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rllm.sandboxes.errors import ImageError

__all__ = ["ImageConfig", "ImageStore", "LocalImage"]


@dataclass(frozen=True)
class ImageConfig:
    """What an image says about the processes started in it (Dockerfile ENV, WORKDIR, USER)."""

    env: dict[str, str] = field(default_factory=dict)
    """Environment of every process, under the spec's."""
    workdir: str | None = None
    """Default working directory; None leaves the spec's."""
    user: str | None = None
    """Default user (name or ``uid[:gid]``); None is root."""


@dataclass(frozen=True)
class LocalImage:
    """One image of the store."""

    name: str
    """Its name (``debian:bookworm``, a task image, a snapshot)."""
    id: str
    """Content id: a hash of its layer ids and config."""
    layers: tuple[Path, ...]
    """Layer directories, bottom first (overlayfs wants ``lowerdir`` top first)."""
    config: ImageConfig
    """ENV, WORKDIR and USER."""
    created_at: float
    """Unix time the manifest was written."""
    labels: dict[str, str] = field(default_factory=dict)
    """Free-form labels (``rllm.snapshot.key`` for snapshots, ...)."""

    def size_bytes(self) -> int:
        """Bytes of its layers on disk (slow for large images)."""
        total = 0
        for layer in self.layers:
            for dirpath, _dirs, files in os.walk(layer):
                for name in files:
                    with contextlib.suppress(OSError):
                        total += os.lstat(os.path.join(dirpath, name)).st_size
        return total


def _manifest_key(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{safe[:80]}-{digest}"


class ImageStore:
    """Images and layers under one directory. Safe for several processes: every write is
    a rename of a finished file or directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.layers_dir = root / "layers"
        self.manifests_dir = root / "manifests"
        self.layers_dir.mkdir(parents=True, exist_ok=True)
        self.manifests_dir.mkdir(parents=True, exist_ok=True)

    # --- layers ---------------------------------------------------------------------
    def new_layer_dir(self) -> Path:
        """An empty directory on the store's filesystem to fill and then ``commit_layer``."""
        return Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.layers_dir))

    def commit_layer(self, directory: Path, layer_id: str | None = None) -> str:
        """Move a filled directory into the store as a layer; returns its id.

        ``layer_id`` is a build step's content hash (so a rebuild finds it); without one
        a fresh id is drawn. An existing layer of that id wins and ``directory`` goes.
        """
        layer_id = layer_id or uuid.uuid4().hex[:16]
        target = self.layers_dir / layer_id
        if target.exists():
            shutil.rmtree(directory, ignore_errors=True)
            return layer_id
        try:
            os.rename(directory, target)
        except OSError:
            if not target.exists():
                raise
            shutil.rmtree(directory, ignore_errors=True)  # another process won the race
        return layer_id

    def has_layer(self, layer_id: str) -> bool:
        """Whether a layer of that id is stored."""
        return (self.layers_dir / layer_id).is_dir()

    def layer_path(self, layer_id: str) -> Path:
        """Directory of a stored layer."""
        path = self.layers_dir / layer_id
        if not path.is_dir():
            raise ImageError(f"layer {layer_id!r} is missing from the image store {self.root}")
        return path

    # --- images ---------------------------------------------------------------------
    def put(
        self,
        name: str,
        layer_ids: list[str],
        config: ImageConfig | None = None,
        labels: dict[str, str] | None = None,
    ) -> LocalImage:
        """Name an image made of ``layer_ids`` (bottom first); replaces one of that name."""
        config = config or ImageConfig()
        for layer_id in layer_ids:
            self.layer_path(layer_id)
        content = json.dumps({"layers": layer_ids, "config": asdict(config)}, sort_keys=True)
        image_id = hashlib.sha256(content.encode()).hexdigest()[:16]
        record = {
            "name": name,
            "id": image_id,
            "layers": layer_ids,
            "config": asdict(config),
            "created_at": time.time(),
            "labels": labels or {},
        }
        path = self.manifests_dir / f"{_manifest_key(name)}.json"
        tmp = path.with_suffix(f".tmp-{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
        os.replace(tmp, path)
        return self._image(record)

    def get(self, name: str) -> LocalImage:
        """The image called ``name``; ``ImageError`` naming it when there is none."""
        image = self.find(name)
        if image is None:
            known = ", ".join(sorted(i.name for i in self.all())) or "none"
            raise ImageError(
                f"image {name!r} is not in the local image store {self.root} (known: {known}); "
                f"build it with `rllm-cli sandbox image build DIR`, or import a root "
                f"filesystem with `rllm-cli sandbox image import {name} ROOTFS.tar`"
            )
        return image

    def find(self, name: str) -> LocalImage | None:
        """The image called ``name``, or None."""
        path = self.manifests_dir / f"{_manifest_key(name)}.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ImageError(f"image manifest {path} is unreadable: {exc}") from exc
        return self._image(record)

    def all(self) -> list[LocalImage]:
        """Every image, by name."""
        images = []
        for path in sorted(self.manifests_dir.glob("*.json")):
            try:
                images.append(self._image(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, ImageError):
                continue
        return sorted(images, key=lambda i: i.name)

    def delete(self, name: str) -> None:
        """Forget an image (its layers stay until ``prune``); ``ImageError`` when unknown."""
        path = self.manifests_dir / f"{_manifest_key(name)}.json"
        try:
            path.unlink()
        except FileNotFoundError:
            raise ImageError(
                f"image {name!r} is not in the local image store {self.root}"
            ) from None

    def prune(self) -> list[str]:
        """Remove layers no image uses; returns their ids."""
        used = {layer.name for image in self.all() for layer in image.layers}
        removed = []
        for layer in self.layers_dir.iterdir():
            if layer.name not in used and not layer.name.startswith(".tmp-"):
                shutil.rmtree(layer, ignore_errors=True)
                removed.append(layer.name)
        return removed

    def _image(self, record: dict[str, object]) -> LocalImage:
        layer_ids = record["layers"]
        config = record.get("config") or {}
        labels = record.get("labels") or {}
        if not isinstance(layer_ids, list) or not isinstance(config, dict):
            raise ImageError(f"image manifest for {record.get('name')!r} is malformed")
        return LocalImage(
            name=str(record["name"]),
            id=str(record["id"]),
            layers=tuple(self.layers_dir / str(i) for i in layer_ids),
            config=ImageConfig(
                env=dict(config.get("env") or {}),
                workdir=config.get("workdir"),
                user=config.get("user"),
            ),
            created_at=float(str(record.get("created_at", 0.0))),
            labels=dict(labels) if isinstance(labels, dict) else {},
        )
