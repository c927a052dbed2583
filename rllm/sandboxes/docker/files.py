"""Files in and out of a container as tar streams (``put_archive`` / ``get_archive``),
extracted on the host only inside the target directory."""

from __future__ import annotations

import io
import posixpath
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["ChunkReader", "dir_tar", "extract_dir", "file_tar", "single_file"]


class ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (docker's archive stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]  # typeshed says Buffer; io passes a bytearray or memoryview, which we slice
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def file_tar(
    path: str,
    data: bytes,
    mode: int,
    owner: tuple[int, int] | None = None,
    dir_mode: int | None = None,
) -> bytes:
    """A tar holding one file at ``path`` (absolute in the container, relative in the tar),
    for ``put_archive("/", ...)``: docker creates its missing parents.

    Args:
        path: where the file goes.
        data: its bytes.
        mode: its permission bits.
        owner: (uid, gid) of the file; None is root.
        dir_mode: when given, the parent directory is in the tar too, with this mode.
    """
    buffer = io.BytesIO()
    name = posixpath.normpath(path).lstrip("/")
    uid, gid = owner or (0, 0)
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if dir_mode is not None:
            parent = tarfile.TarInfo(posixpath.dirname(name))
            parent.type, parent.mode, parent.mtime = tarfile.DIRTYPE, dir_mode, int(time.time())
            tar.addfile(parent)
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        info.uid, info.gid = uid, gid
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def dir_tar(local: Path, remote: str, owner: tuple[int, int] | None = None) -> IO[bytes]:
    """A tar (in a temporary file, at its start) of ``local``'s contents under ``remote``,
    owned by ``owner`` (uid, gid; None is root)."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 - returned open, the caller closes it
    prefix = posixpath.normpath(remote).lstrip("/")
    uid, gid = owner or (0, 0)

    def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        return info

    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(local, arcname=prefix or ".", recursive=True, filter=own)
    out.seek(0)
    return out


def single_file(chunks: Iterable[bytes], path: str) -> tuple[bytes | None, str | None]:
    """The regular file in a one-member archive stream: (data, None), or (None, the link
    target) when it is a symbolic link. ``IsADirectoryError`` when it is a directory."""
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        for member in tar:
            if member.isdir():
                raise IsADirectoryError(f"{path} is a directory in the sandbox, not a file")
            if member.issym():
                return None, member.linkname
            if member.islnk():
                return None, "/" + member.linkname.lstrip("/")
            handle = tar.extractfile(member)
            if handle is None:
                raise OSError(f"{path} is not a regular file in the sandbox ({member.type!r})")
            return handle.read(), None
    raise FileNotFoundError(path)


def _strip_first(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    name = member.name.split("/", 1)
    if len(name) < 2 or not name[1]:
        return None  # the directory itself: made by the caller
    member = member.replace(name=name[1], deep=False)
    if member.islnk():
        linked = member.linkname.split("/", 1)
        member = member.replace(linkname=linked[1] if len(linked) == 2 else "", deep=False)
    try:
        return tarfile.data_filter(member, dest)
    except (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError):
        return None  # a link that points outside the copy is left out, never followed


def extract_dir(chunks: Iterable[bytes], local: Path) -> None:
    """Extract docker's archive of a directory (members under its basename) into
    ``local``: every member must land inside it (tarfile's ``data`` filter); links that
    point outside are left out; devices and setuid bits are dropped."""
    local.mkdir(parents=True, exist_ok=True)
    dest = str(local.resolve())
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        for member in tar:
            kept = _strip_first(member, dest)
            if kept is not None:
                tar.extract(kept, dest, filter="fully_trusted")
