"""Freezing a sandbox's writable layer: its overlay upper directory copied into the
image store as a new read-only layer (modes, xattrs and whiteouts kept; owners mapped
from the sandbox's host ids back to the ids inside, as layers hold them)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from rllm.sandboxes.errors import SnapshotError
from rllm.sandboxes.images.store import ImageStore
from rllm.sandboxes.local.privileges import ID_RANGE

__all__ = ["copy_upper"]

_OVERLAY_PRIVATE = ("trusted.overlay.origin", "trusted.overlay.impure")
"""Xattrs that describe the upper's own mount (file handles of its lowers): dropped."""


def copy_upper(
    upper: Path, store: ImageStore, layer_id: str | None = None, id_base: int = 0
) -> str:
    """Copy ``upper`` into ``store`` as layer ``layer_id`` (default: a fresh id); owners
    ``id_base``.. become 0.. (ids outside the sandbox's range become root).

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
    _finish_layer(target, id_base)
    return store.commit_layer(target, layer_id)


def _inside(host: int, id_base: int) -> int:
    inside = host - id_base
    return inside if 0 <= inside < ID_RANGE else 0


def _finish_layer(root: Path, id_base: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            if id_base:
                with contextlib.suppress(OSError):
                    info = os.lstat(path)
                    uid, gid = _inside(info.st_uid, id_base), _inside(info.st_gid, id_base)
                    if (uid, gid) != (info.st_uid, info.st_gid):
                        mode = info.st_mode
                        os.lchown(path, uid, gid)
                        if not os.path.islink(path) and mode & 0o6000:  # chown clears set-id
                            os.chmod(path, mode & 0o7777)
            with contextlib.suppress(OSError):
                for attr in os.listxattr(path, follow_symlinks=False):
                    if attr in _OVERLAY_PRIVATE:
                        os.removexattr(path, attr, follow_symlinks=False)
