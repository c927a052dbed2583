"""Lay out a folder of files on the host, for the sandbox tests that upload one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_tree"]


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write each of ``files`` (a path relative to ``root``: its text or bytes) under
    ``root``, making the folders on the way.

    Returns:
        ``root``, to upload.
    """
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root
