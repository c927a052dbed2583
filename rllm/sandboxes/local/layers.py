"""Freezing a sandbox's writable layer: its overlay upper directory copied into the
image store as a new read-only layer (owners, modes, xattrs and whiteouts kept)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from rllm.sandboxes.errors import SnapshotError
from rllm.sandboxes.images.store import ImageStore

__all__ = ["copy_upper"]

_OVERLAY_PRIVATE = ("trusted.overlay.origin", "trusted.overlay.impure")
"""Xattrs that describe the upper's own mount (file handles of its lowers): dropped."""


def copy_upper(upper: Path, store: ImageStore, layer_id: str | None = None) -> str:
    """Copy ``upper`` into ``store`` as layer ``layer_id`` (default: a fresh id).

    Raises:
        SnapshotError: the copy failed (the message quotes ``cp``).
    """
    if layer_id is not None and store.has_layer(layer_id):
        return layer_id
    target = store.new_layer_dir()
    proc = subprocess.run(
        ["cp", "-a", "--preserve=all", "--", f"{upper}/.", f"{target}/"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise SnapshotError(f"copying the sandbox's layer {upper} failed: {proc.stderr.strip()}")
    _drop_overlay_xattrs(target)
    return store.commit_layer(target, layer_id)


def _drop_overlay_xattrs(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                for attr in os.listxattr(path, follow_symlinks=False):
                    if attr in _OVERLAY_PRIVATE:
                        os.removexattr(path, attr, follow_symlinks=False)
