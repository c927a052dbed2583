"""The few Linux system calls the local backend needs that Python does not wrap:
``mount``/``umount2`` (the overlay), ``open_tree``/``mount_setattr`` (id-mapped image
layers), ``setns`` (the gateway forwarder) and ``openat2`` (file operations confined to a
sandbox's root)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

__all__ = [
    "CLONE_NEWNET",
    "MNT_DETACH",
    "RESOLVE_IN_ROOT",
    "RESOLVE_NO_MAGICLINKS",
    "idmapped_clone",
    "mount",
    "openat2",
    "setns",
    "umount",
]

CLONE_NEWNET = 0x40000000
"""``setns`` namespace type: network."""
MNT_DETACH = 2
"""``umount2`` flag: detach now, free when the last user goes."""
RESOLVE_NO_MAGICLINKS = 0x02
"""``openat2``: refuse ``/proc/PID/fd``-style links."""
RESOLVE_IN_ROOT = 0x10
"""``openat2``: resolve as if ``dirfd`` were ``/`` (``..`` and absolute links stay in it)."""

_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64 (new syscalls are unified)
_SYS_OPEN_TREE = 428
_SYS_MOUNT_SETATTR = 442
_OPEN_TREE_CLONE = 1
_AT_EMPTY_PATH = 0x1000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_IDMAP = 0x100000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str, options: str, flags: int = 0) -> None:
    """``mount(2)``; ``OSError`` with the errno and what was mounted."""
    result = _libc.mount(source.encode(), target.encode(), fstype.encode(), flags, options.encode())
    _check(result, f"mount {fstype} on {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    """``umount2(2)`` (lazy by default); ``OSError`` when it fails."""
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def setns(fd: int, nstype: int) -> None:
    """Move the calling thread into the namespace open at ``fd``."""
    _check(_libc.setns(fd, nstype), "setns")


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """``openat2(2)``: open ``path`` under ``dirfd`` with ``resolve`` restrictions.

    Raises:
        OSError: the errno of the call (``FileNotFoundError`` and friends), naming ``path``.
    """
    how = struct.pack("QQQ", flags | os.O_CLOEXEC, mode, resolve)
    buf = ctypes.create_string_buffer(how, len(how))
    fd = int(_libc.syscall(_SYS_OPENAT2, dirfd, path.encode(), buf, ctypes.c_size_t(len(how))))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def idmapped_clone(path: str, userns_fd: int, read_only: bool = True) -> int:
    """A detached copy of the mount at ``path`` whose file owners are mapped through the
    user namespace open at ``userns_fd`` (``open_tree`` + ``mount_setattr``); returns its
    fd, usable as a path through ``/proc/self/fd/N`` until closed.

    Raises:
        OSError: the kernel refused (id-mapped mounts need Linux 5.12, on this filesystem).
    """
    fd = int(_libc.syscall(_SYS_OPEN_TREE, -100, path.encode(), _OPEN_TREE_CLONE | os.O_CLOEXEC))
    _check(fd, f"open_tree {path}")
    flags = _MOUNT_ATTR_IDMAP | (_MOUNT_ATTR_RDONLY if read_only else 0)
    attr = struct.pack("QQQQ", flags, 0, 0, userns_fd)
    buf = ctypes.create_string_buffer(attr, len(attr))
    result = int(
        _libc.syscall(_SYS_MOUNT_SETATTR, fd, b"", _AT_EMPTY_PATH, buf, ctypes.c_size_t(len(attr)))
    )
    if result < 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, f"mount_setattr (id map) on {path}: {os.strerror(err)}")
    return fd
