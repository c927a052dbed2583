"""A local image's overlayfs layers as one tar stream (what ``docker import`` reads):
the topmost copy of each path, with whiteouts and opaque directories applied."""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

__all__ = ["write_flat_tar"]

_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _is_opaque(path: str) -> bool:
    for attr in _OPAQUE:
        try:
            if os.getxattr(path, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every path under ``root`` as (relative path, lstat), parents before children."""
    stack = [""]
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel) if rel else str(root)
        with os.scandir(full) as entries:
            for entry in sorted(entries, key=lambda e: e.name, reverse=True):
                child = f"{rel}/{entry.name}" if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                yield child, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(child)


def _hidden(rel: str, covered: set[str]) -> bool:
    """Whether an upper layer hides ``rel`` (it, or a parent, is whited out or opaque)."""
    parts = rel.split("/")
    return any("/".join(parts[:i]) in covered for i in range(1, len(parts)))


def write_flat_tar(layers: Sequence[Path], out: IO[bytes]) -> None:
    """Write the merged tree of ``layers`` (bottom first) to ``out`` as a tar stream.

    A path comes from the topmost layer that has it; whiteouts (0/0 character devices)
    delete what lies below them, an opaque directory hides the lower layers' contents,
    and a non-directory hides whatever lower layers hold under its path.
    """
    seen: set[str] = set()
    deleted: set[str] = set()  # paths removed for every lower layer
    covers: set[str] = set()  # paths whose lower-layer children are hidden
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for layer in reversed(layers):
            new_deleted: set[str] = set()
            new_covers: set[str] = set()
            for rel, st in _walk(layer):
                if rel in deleted or _hidden(rel, covers | deleted):
                    continue
                full = os.path.join(layer, rel)
                if _is_whiteout(st):
                    new_deleted.add(rel)
                    continue
                is_dir = stat.S_ISDIR(st.st_mode)
                if not is_dir or _is_opaque(full):
                    new_covers.add(rel)
                if rel in seen:
                    continue
                seen.add(rel)
                info = tar.gettarinfo(full, arcname=rel)
                if info.isreg():
                    with open(full, "rb") as data:
                        tar.addfile(info, data)
                else:
                    tar.addfile(info)
            deleted |= new_deleted
            covers |= new_covers
