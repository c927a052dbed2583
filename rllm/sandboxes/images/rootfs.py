"""An image's root filesystem seen through its layers, and a new layer written on top,
on the host, without mounting anything.

``LayerView`` answers what a path is in the merged tree (overlayfs rules: the top layer
wins, a 0/0 character device is a whiteout, an opaque directory hides the layers below)
and resolves symlinks inside the image, never on the host. ``LayerWriter`` puts files
into a new layer at image paths resolved that way, so ``COPY x /bin/`` lands in
``/usr/bin`` of a merged-usr Debian rather than shadowing the ``/bin`` symlink; the
parent directories it must create copy the mode and owner the image gives them.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from collections.abc import Sequence
from pathlib import Path

from rllm.sandboxes.errors import ImageError

__all__ = ["LayerView", "LayerWriter", "extract_tar"]

_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _is_opaque(path: Path) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


class LayerView:
    """The merged tree of ``layers`` (bottom first, as ``LocalImage.layers``)."""

    def __init__(self, layers: Sequence[Path]) -> None:
        self.top_first = list(reversed(layers))

    def lstat(self, path: str) -> tuple[Path, os.stat_result] | None:
        """Where the entry at image path ``path`` is on the host and its ``lstat``, or
        None when the image has nothing there. Symlinks are not followed."""
        parts = _parts(path)
        if not parts:
            return (self.top_first[0], os.lstat(self.top_first[0])) if self.top_first else None
        visible = self.top_first
        for depth in range(len(parts)):
            rel = "/".join(parts[: depth + 1])
            found: tuple[Path, os.stat_result] | None = None
            below: list[Path] = []
            for layer in visible:
                host = layer / rel
                try:
                    st = os.lstat(host)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                if _is_whiteout(st):
                    break
                if found is None:
                    found = (host, st)
                if not stat.S_ISDIR(st.st_mode) or not stat.S_ISDIR(found[1].st_mode):
                    break
                below.append(layer)
                if _is_opaque(host):
                    break
            if found is None or depth == len(parts) - 1:
                return found
            if not stat.S_ISDIR(found[1].st_mode):
                return None
            visible = below
        return None

    def resolve(self, path: str, follow_last: bool = True) -> str:
        """The absolute image path ``path`` names once every symlink on the way (and the
        last one, with ``follow_last``) is followed inside the image."""
        todo, done, hops = _parts(path), list[str](), 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            if not todo and not follow_last:
                done.append(part)
                break
            found = self.lstat("/".join([*done, part]))
            if found is not None and stat.S_ISLNK(found[1].st_mode):
                hops += 1
                if hops > 40:
                    raise ImageError(f"too many levels of symlinks resolving {path!r} in the image")
                target = os.readlink(found[0])
                if target.startswith("/"):
                    done = []
                todo = _parts(target) + todo
                continue
            done.append(part)
        return "/" + "/".join(done)

    def read_text(self, path: str) -> str | None:
        """A regular file's text (symlinks followed), or None when there is none."""
        found = self.lstat(self.resolve(path))
        if found is None or not stat.S_ISREG(found[1].st_mode):
            return None
        return found[0].read_text(encoding="utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        """Names in the merged directory ``path`` (symlinks followed), sorted."""
        resolved = self.resolve(path)
        rel = "/".join(_parts(resolved))
        names: set[str] = set()
        for layer in self.top_first:
            host = layer / rel if rel else layer
            if host.is_dir() and not host.is_symlink():
                names.update(os.listdir(host))
        return sorted(n for n in names if self.lstat(f"{resolved}/{n}") is not None)

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory in the image (symlinks followed)."""
        found = self.lstat(self.resolve(path))
        return found is not None and stat.S_ISDIR(found[1].st_mode)


class LayerWriter:
    """Writes a new layer (``layer_dir``) on top of ``lower`` at image paths."""

    def __init__(self, layer_dir: Path, lower: Sequence[Path]) -> None:
        self.layer_dir = layer_dir
        self.view = LayerView([*lower, layer_dir])

    def host_path(self, image_path: str) -> Path:
        """The host path in the new layer for ``image_path``, its parents resolved inside
        the image and created in the layer (with the image's modes and owners)."""
        parent, _, name = self.view.resolve(image_path, follow_last=False).rpartition("/")
        self._ensure_dir(parent)
        return self.layer_dir / parent.lstrip("/") / name

    def _ensure_dir(self, resolved: str) -> None:
        current = self.layer_dir
        for depth, part in enumerate(_parts(resolved)):
            current = current / part
            if current.is_symlink():
                raise ImageError(f"refusing to write through the symlink {current}")
            if current.is_dir():
                continue
            found = self.view.lstat("/" + "/".join(_parts(resolved)[: depth + 1]))
            if found is not None and stat.S_ISDIR(found[1].st_mode):
                st = found[1]
                self.mkdir(current, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime)
            else:
                if current.exists():
                    current.unlink()
                self.mkdir(current, 0o755, 0, 0)

    @staticmethod
    def mkdir(host: Path, mode: int, uid: int, gid: int, mtime: float | None = None) -> None:
        """Create (or re-own) one directory of the layer."""
        host.mkdir(exist_ok=True)
        os.chown(host, uid, gid)
        os.chmod(host, mode)
        if mtime is not None:
            os.utime(host, (mtime, mtime))

    @staticmethod
    def replace(host: Path) -> None:
        """Make room for a new entry at ``host`` (what this layer already had there)."""
        if host.is_symlink() or (host.exists() and not host.is_dir()):
            host.unlink()

    def finish(self, host: Path, mode: int | None, uid: int, gid: int, mtime: float) -> None:
        """Set an entry's owner, mode (not for symlinks) and modification time."""
        os.lchown(host, uid, gid)
        if mode is not None and not host.is_symlink():
            os.chmod(host, mode)
        os.utime(host, (mtime, mtime), follow_symlinks=False)


def extract_tar(
    archive: Path,
    writer: LayerWriter,
    dest: str,
    *,
    strip_absolute: bool,
    owner: tuple[int, int] | None = None,
) -> int:
    """Extract ``archive`` (tar, optionally compressed) into image directory ``dest``.

    Ownership and modes come from the archive (``owner`` overrides the owner); device
    nodes are skipped (a sandbox has its own ``/dev``). Members with ``..`` are refused,
    and absolute ones too unless ``strip_absolute`` (``ADD`` strips the ``/`` as tar does).
    Returns how many entries were written.

    Raises:
        ImageError: the archive is unreadable or has a member outside ``dest``.
    """
    count, dirs = 0, list[tuple[Path, int, int, int, float]]()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                name = member.name
                if name.startswith("/") and not strip_absolute:
                    raise ImageError(f"{archive}: member {name!r} is an absolute path; refused")
                if ".." in name.split("/"):
                    raise ImageError(f"{archive}: member {name!r} leaves the root with ..; refused")
                parts = _parts(name)
                if not parts:
                    continue
                image_path = dest.rstrip("/") + "/" + "/".join(parts)
                uid, gid = owner or (member.uid, member.gid)
                mode = member.mode & 0o7777
                if member.isdir():
                    host = writer.host_path(image_path)
                    writer.replace(host)
                    writer.mkdir(host, 0o700, uid, gid)
                    dirs.append((host, mode, uid, gid, float(member.mtime)))
                    count += 1
                    continue
                if member.isdev():
                    continue
                host = writer.host_path(image_path)
                if host.is_dir() and not host.is_symlink():
                    shutil.rmtree(host)
                writer.replace(host)
                if member.issym():
                    os.symlink(member.linkname, host)
                elif member.islnk():
                    if ".." in member.linkname.split("/"):
                        raise ImageError(f"{archive}: hard link {name!r} leaves the root; refused")
                    link_path = dest.rstrip("/") + "/" + "/".join(_parts(member.linkname))
                    os.link(writer.host_path(link_path), host, follow_symlinks=False)
                    continue
                elif member.isfifo():
                    os.mkfifo(host)
                else:
                    source = tar.extractfile(member)
                    if source is None:
                        continue
                    with source, open(host, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                writer.finish(host, mode, uid, gid, float(member.mtime))
                count += 1
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ImageError(f"cannot extract {archive}: {exc}") from exc
    for host, mode, uid, gid, mtime in reversed(dirs):
        writer.finish(host, mode, uid, gid, mtime)
    return count
