"""One OCI image layer (a tar, gzip or zstd) unpacked into a layer directory of the store.

The tar's paths are taken literally (a layer is a diff, not a tree to resolve), owners
and modes are kept as the image has them (root stays 0), and OCI whiteouts become
overlayfs ones: ``.wh.NAME`` a 0/0 character device ``NAME``, ``.wh..wh..opq`` the
directory's ``trusted.overlay.opaque=y``. The uncompressed bytes are hashed on the way
and must match the config's ``diff_id``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path
from typing import IO

from rllm.sandboxes.errors import ImageError

__all__ = ["unpack_layer"]

_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"


class _Hashing:
    """A read-only stream that hashes what is read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.digest.update(data)
        return data

    def drain(self) -> str:
        while self.read(1 << 20):
            pass
        return "sha256:" + self.digest.hexdigest()


def unpack_layer(blob: Path, media_type: str, diff_id: str, target: Path) -> int:
    """Unpack layer ``blob`` into the empty directory ``target``; returns its entries.

    Raises:
        ImageError: an unknown compression, an unreadable tar, a member that leaves the
            layer, or content whose digest is not ``diff_id``.
    """
    proc: subprocess.Popen[bytes] | None = None
    if media_type.endswith("+zstd"):
        zstd = shutil.which("zstd")
        if zstd is None:
            raise ImageError(f"layer {blob.name} is zstd-compressed: apt-get install -y zstd")
        proc = subprocess.Popen([zstd, "-dc", str(blob)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        raw: IO[bytes] = proc.stdout
    elif media_type.endswith("+gzip") or media_type.endswith(".gzip"):
        import gzip

        raw = gzip.GzipFile(blob, "rb")  # type: ignore[assignment]  # GzipFile is a binary IO
    elif media_type.endswith(".tar") or media_type.endswith("tar"):
        raw = open(blob, "rb")  # noqa: SIM115  # closed below
    else:
        raise ImageError(f"layer {blob.name} has media type {media_type!r}, not a tar layer")
    stream = _Hashing(raw)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]  # _Hashing has only read(): all a stream ("r|") needs, less than typeshed's _Fileobj
            count = _extract(tar, target)
        got = stream.drain()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ImageError(f"layer {blob.name} is not a readable tar: {exc}") from exc
    finally:
        raw.close()
        if proc is not None:
            proc.wait()
    if got != diff_id:
        raise ImageError(f"layer {blob.name} unpacks to {got}, but the image config says {diff_id}")
    return count


def _safe(target: Path, name: str) -> Path:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ImageError(f"layer member {name!r} leaves the root with ..; refused")
    current = target
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise ImageError(f"layer member {name!r} goes through the symlink /{part}; refused")
        if not current.exists():
            current.mkdir(mode=0o755)
    return current / parts[-1] if parts else target


def _extract(tar: tarfile.TarFile, target: Path) -> int:
    count, dirs = 0, list[tuple[Path, tarfile.TarInfo]]()
    for member in tar:
        host = _safe(target, member.name)
        base = host.name
        if base == _OPAQUE:
            os.setxattr(host.parent, "trusted.overlay.opaque", b"y")
            continue
        if base.startswith(_WHITEOUT):
            hidden = host.with_name(base[len(_WHITEOUT) :])
            _clear(hidden)
            os.mknod(hidden, stat.S_IFCHR | 0o000, os.makedev(0, 0))
            count += 1
            continue
        if host == target:
            dirs.append((host, member))
            continue
        if member.isdir():
            if not host.is_dir() or host.is_symlink():
                _clear(host)
                host.mkdir(mode=0o700)
            dirs.append((host, member))
            count += 1
            continue
        if member.isdev():
            continue  # a sandbox mounts its own /dev
        _clear(host)
        if member.issym():
            os.symlink(member.linkname, host)
        elif member.islnk():
            os.link(_safe(target, member.linkname), host, follow_symlinks=False)
            count += 1
            continue
        elif member.isfifo():
            os.mkfifo(host)
        else:
            source = tar.extractfile(member)
            with open(host, "wb") as out:
                if source is not None:
                    shutil.copyfileobj(source, out, 1 << 20)
        _finish(host, member)
        count += 1
    for host, member in reversed(dirs):
        _finish(host, member)
    return count


def _clear(host: Path) -> None:
    if host.is_symlink() or (host.exists() and not host.is_dir()):
        host.unlink()
    elif host.is_dir():
        shutil.rmtree(host)


def _finish(host: Path, member: tarfile.TarInfo) -> None:
    os.lchown(host, member.uid, member.gid)
    if not member.issym():
        os.chmod(host, member.mode & 0o7777)
    for key, value in member.pax_headers.items():
        if key.startswith("SCHILY.xattr.") and not member.issym():
            with contextlib.suppress(OSError):  # a filesystem without that namespace
                os.setxattr(
                    host,
                    key.removeprefix("SCHILY.xattr."),
                    value.encode("utf-8", "surrogateescape"),
                )
    os.utime(host, (member.mtime, member.mtime), follow_symlinks=False)
