"""File operations on a sandbox's filesystem from the host, confined to its root.

Every path is resolved by ``openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`` under
``/proc/<pid 1>/root`` (the sandbox's own view, ``/tmp`` and all): ``..`` and absolute
symlinks stay inside, ``/proc/PID/root``-style links are refused, so no symlink the
sandbox made can lead the host outside it. No process is started (microseconds, not an
``exec`` with tar). Trees copied out are walked by file descriptor and written on the
host without following links. What the host creates inside belongs to the sandbox's root
(``owner``), never to host root (which the sandbox could not use).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from rllm.sandboxes.local.syscalls import RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS, openat2

__all__ = ["SandboxFiles"]

_RESOLVE = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
_COPY_CHUNK = 1 << 20


class SandboxFiles:
    """The files of one sandbox, reached through a directory that is its root."""

    def __init__(self, root: str, hold: bool = False, owner: tuple[int, int] | None = None) -> None:
        """Args:
        root: ``/proc/<pid 1>/root`` of a running sandbox (or a root directory).
        hold: open ``root`` now and keep it (until ``close``), so that a later process
            reusing the pid can never be mistaken for the sandbox.
        owner: host uid and gid that what is created here gets (the sandbox's root);
            None: the creator's.
        """
        self.root = root
        self.owner = owner
        self._held: int | None = None
        if hold:
            self._held = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        """Let go of a held root. Idempotent."""
        held, self._held = self._held, None
        if held is not None:
            os.close(held)

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        if self._held is not None:
            fd = os.dup(self._held)
        else:
            fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)

    def _open(self, root_fd: int, path: str, flags: int, mode: int = 0) -> int:
        return openat2(root_fd, _inside(path), flags, mode, _RESOLVE)

    def makedirs(self, path: str, mode: int = 0o755) -> None:
        """``mkdir -p`` inside the sandbox."""
        with self._root_fd() as root_fd:
            os.close(self._makedirs(root_fd, path, mode))

    def _makedirs(self, root_fd: int, path: str, mode: int) -> int:
        """Create ``path`` and its parents; returns an ``O_PATH`` fd of it."""
        parts = PurePosixPath(_inside(path)).parts[1:]
        fd = os.dup(root_fd)
        current = "/"
        for part in parts:
            current = f"{current.rstrip('/')}/{part}"
            try:
                os.mkdir(part, mode, dir_fd=fd)
                if self.owner is not None:
                    os.chown(part, *self.owner, dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                pass
            os.close(fd)
            fd = self._open(root_fd, current, os.O_PATH | os.O_DIRECTORY)
        return fd

    def open_dir(self, path: str, create: bool = False) -> int:
        """An ``O_PATH`` fd of directory ``path`` (made, with its parents, if ``create``)."""
        with self._root_fd() as root_fd:
            if create:
                return self._makedirs(root_fd, path, 0o755)
            return self._open(root_fd, path, os.O_PATH | os.O_DIRECTORY)

    def open_file(self, path: str, create: bool = False) -> int:
        """An ``O_PATH`` fd of ``path`` (an empty file made, with its parents, if it is
        missing and ``create``)."""
        try:
            return self._path_fd(path)
        except FileNotFoundError:
            if not create:
                raise
        self.write(path, b"")
        return self._path_fd(path)

    def _path_fd(self, path: str) -> int:
        with self._root_fd() as root_fd:
            return self._open(root_fd, path, os.O_PATH)

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` (parents created), with exactly ``mode``."""
        parent = str(PurePosixPath(_inside(path)).parent)
        with self._root_fd() as root_fd:
            os.close(self._makedirs(root_fd, parent, 0o755))
            fd = self._create(root_fd, path, mode)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)

    def _create(self, root_fd: int, path: str, mode: int) -> int:
        """Open ``path`` for writing, created or emptied: a regular file, the sandbox
        root's, with exactly ``mode``. The caller closes the descriptor."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK
        fd = self._open(root_fd, path, flags, mode & 0o7777)
        try:
            _require_regular(fd, path)
            self._claim(fd)
            os.fchmod(fd, mode & 0o7777)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _claim(self, fd: int) -> None:
        """Give a file that host root owns (one we just made) to the sandbox's root."""
        if self.owner is not None and os.fstat(fd).st_uid == 0:
            os.fchown(fd, *self.owner)

    def read(self, path: str) -> bytes:
        """The bytes of ``path``; ``FileNotFoundError`` when it is not there."""
        with self._root_fd() as root_fd:
            fd = self._open(root_fd, path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            _require_regular(fd, path)
            chunks = []
            while chunk := os.read(fd, _COPY_CHUNK):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def upload(self, local: Path, remote: str) -> None:
        """Copy the contents of host directory ``local`` into ``remote`` (created);
        symlinks are copied as links, other special files skipped."""
        if not local.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory on the host", str(local))
        with self._root_fd() as root_fd:
            os.close(self._makedirs(root_fd, remote, 0o755))
            base = PurePosixPath(_inside(remote))
            for dirpath, dirnames, filenames in os.walk(local):
                rel = Path(dirpath).relative_to(local)
                target = base / rel.as_posix() if rel.parts else base
                for name in dirnames:
                    host = Path(dirpath) / name
                    if host.is_symlink():
                        self._symlink(root_fd, target, name, os.readlink(host))
                    else:
                        mode = host.stat().st_mode & 0o7777
                        os.close(self._makedirs(root_fd, str(target / name), mode))
                for name in filenames:
                    host = Path(dirpath) / name
                    info = host.lstat()
                    if stat.S_ISLNK(info.st_mode):
                        self._symlink(root_fd, target, name, os.readlink(host))
                    elif stat.S_ISREG(info.st_mode):
                        self._copy_in(root_fd, host, str(target / name), info.st_mode)

    def _symlink(self, root_fd: int, parent: PurePosixPath, name: str, link: str) -> None:
        dir_fd = self._open(root_fd, str(parent), os.O_PATH | os.O_DIRECTORY)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
            os.symlink(link, name, dir_fd=dir_fd)
            if self.owner is not None:
                os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)
        finally:
            os.close(dir_fd)

    def _copy_in(self, root_fd: int, host: Path, path: str, mode: int) -> None:
        fd = self._create(root_fd, path, mode)
        try:
            with open(host, "rb") as src:
                while chunk := src.read(_COPY_CHUNK):
                    _write_all(fd, chunk)
        finally:
            os.close(fd)

    def download(self, remote: str, local: Path) -> None:
        """Copy the contents of ``remote`` into host directory ``local`` (created).

        The sandbox's tree is walked by descriptor without following links; on the host,
        existing links in the way are replaced, never followed.
        """
        local.mkdir(parents=True, exist_ok=True)
        with self._root_fd() as root_fd:
            top = self._open(root_fd, remote, os.O_RDONLY | os.O_DIRECTORY)
        host_top = os.open(local, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        host_fds = {".": host_top}
        try:
            for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
                host_fd = host_fds[dirpath]
                for name in dirnames:
                    if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                        _copy_out(dir_fd, name, host_fd)  # a link to a directory: not walked
                    else:
                        host_fds[os.path.join(dirpath, name)] = _host_dir(host_fd, name)
                for name in filenames:
                    _copy_out(dir_fd, name, host_fd)
        finally:
            for fd in host_fds.values():
                os.close(fd)
            os.close(top)


def _inside(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"sandbox path {path!r} must be absolute (start with /)")
    return path


def _require_regular(fd: int, path: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise IsADirectoryError(errno.EISDIR, "not a regular file in the sandbox", path)
    os.set_blocking(fd, True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _host_dir(parent_fd: int, name: str) -> int:
    """Open (creating) host directory ``name``; a link or file in the way is replaced."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError:  # a symlink (ELOOP) or a file (ENOTDIR): never follow it
        os.unlink(name, dir_fd=parent_fd)
    os.mkdir(name, 0o755, dir_fd=parent_fd)
    return os.open(name, flags, dir_fd=parent_fd)


def _copy_out(dir_fd: int, name: str, host_fd: int) -> None:
    info = os.lstat(name, dir_fd=dir_fd)
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=host_fd)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=dir_fd), name, dir_fd=host_fd)
        return
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(name, flags, info.st_mode & 0o777, dir_fd=host_fd)
        try:
            while chunk := os.read(src, _COPY_CHUNK):
                _write_all(dst, chunk)
        finally:
            os.close(dst)
    finally:
        os.close(src)
