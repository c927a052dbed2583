"""A sandbox's root filesystem: a kernel overlay of read-only image layers and a
per-sandbox upper directory (copy-on-write, so creating a sandbox copies nothing),
optionally on a size-limited tmpfs that enforces ``disk_mb``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.local.syscalls import mount, umount

__all__ = ["RootfsDirs", "mount_rootfs", "unmount_rootfs"]

_MAX_OPTIONS = 4000  # the kernel copies at most one page (4096 bytes) of mount options


class RootfsDirs:
    """The directories of one sandbox's root under its run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.disk = run_dir / "disk"
        """Holds ``upper`` and ``work``: a tmpfs when the disk is limited."""
        self.upper = self.disk / "upper"
        self.work = self.disk / "work"
        self.merged = run_dir / "merged"


def mount_rootfs(dirs: RootfsDirs, layers: Sequence[Path], disk_mb: int | None) -> None:
    """Mount the overlay of ``layers`` (bottom first) at ``dirs.merged``.

    Raises:
        SandboxError: the kernel refused the mount (the message says what to check).
    """
    if not layers:
        raise SandboxError("an image with no layers cannot be a sandbox's root filesystem")
    dirs.disk.mkdir(parents=True, exist_ok=True)
    dirs.merged.mkdir(exist_ok=True)
    if disk_mb is not None:
        try:
            mount("tmpfs", str(dirs.disk), "tmpfs", f"size={disk_mb}m,mode=0700")
        except OSError as exc:
            raise SandboxError(f"cannot mount a {disk_mb} MB tmpfs for disk_mb: {exc}") from exc
    dirs.upper.mkdir()
    dirs.work.mkdir()
    opened: list[int] = []
    try:
        options = _options(dirs, layers, opened)
        mount("overlay", str(dirs.merged), "overlay", options)
    except OSError as exc:
        unmount_rootfs(dirs)
        raise SandboxError(
            f"cannot mount the overlay root of {dirs.run_dir} over {len(layers)} layers: {exc}; "
            f"the kernel needs overlayfs (modprobe overlay) and the host must be root"
        ) from exc
    finally:
        for fd in opened:
            os.close(fd)


def _options(dirs: RootfsDirs, layers: Sequence[Path], opened: list[int]) -> str:
    """Overlay mount options; paths too long or with ``,``/``:`` go through
    ``/proc/self/fd/N`` links so the options fit the kernel's one-page limit."""

    def plain(paths: list[str]) -> str:
        upper, work = paths[-2:]
        return f"lowerdir={':'.join(paths[:-2])},upperdir={upper},workdir={work}"

    paths = [str(p) for p in (*reversed(layers), dirs.upper, dirs.work)]
    text = plain(paths)
    if len(text) <= _MAX_OPTIONS and not any(c in p for p in paths for c in ",:"):
        return text
    short = []
    for path in paths:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        opened.append(fd)
        short.append(f"/proc/self/fd/{fd}")
    text = plain(short)
    if len(text) > _MAX_OPTIONS:
        raise OSError(f"{len(layers)} layers do not fit in one overlay mount; squash the image")
    return text


def unmount_rootfs(dirs: RootfsDirs) -> None:
    """Detach the overlay and the disk tmpfs (either may be missing)."""
    for target in (dirs.merged, dirs.disk):
        while _is_mountpoint(target):
            try:
                umount(str(target))
            except OSError:
                break


def _is_mountpoint(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return os.path.ismount(path)
    return False
