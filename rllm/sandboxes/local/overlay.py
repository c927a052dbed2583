"""A sandbox's root filesystem: a kernel overlay of read-only image layers and a
per-sandbox upper directory (copy-on-write, so creating a sandbox copies nothing),
optionally on a size-limited tmpfs that enforces ``disk_mb``.

The layers keep the owners the image gives them (root is 0 on disk) and are mounted
id-mapped through the sandbox id map, so that they belong to the sandbox's unprivileged
host ids; the upper directory holds host ids (``copy_upper`` maps them back). Every
directory is given to the kernel as ``/proc/self/fd/N``: the overlay's options, which the
sandbox reads in its ``/proc/self/mountinfo``, name no host path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.local.files import SandboxFiles
from rllm.sandboxes.local.privileges import IdMap
from rllm.sandboxes.local.syscalls import idmapped_clone, mount, umount
from rllm.sandboxes.types import Mount

__all__ = ["MOUNT_DIR", "RootfsDirs", "bind_mounts", "mount_rootfs", "unmount_rootfs"]

_MAX_OPTIONS = 4000  # the kernel copies at most one page (4096 bytes) of mount options
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC = 1, 32, 4096, 16384

MOUNT_DIR = Path("/run/rllm-sandboxes")
"""Where sandbox roots are mounted (mode 0711): bubblewrap, which runs as the sandbox's
unprivileged host root, must reach them by a path it may traverse."""


class RootfsDirs:
    """The directories of one sandbox's root under its run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.disk = run_dir / "disk"
        """Holds ``upper`` and ``work``: a tmpfs when the disk is limited."""
        self.upper = self.disk / "upper"
        self.work = self.disk / "work"
        self.merged = MOUNT_DIR / run_dir.name


def mount_rootfs(
    dirs: RootfsDirs, layers: Sequence[Path], disk_mb: int | None, idmap: IdMap
) -> None:
    """Mount the overlay of ``layers`` (bottom first), id-mapped through ``idmap``, at
    ``dirs.merged``.

    Raises:
        SandboxError: the kernel refused the mount (the message says what to check).
    """
    if not layers:
        raise SandboxError("an image with no layers cannot be a sandbox's root filesystem")
    dirs.disk.mkdir(parents=True, exist_ok=True)
    MOUNT_DIR.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(MOUNT_DIR, 0o711)
    dirs.merged.mkdir(exist_ok=True)
    if disk_mb is not None:
        try:
            mount("tmpfs", str(dirs.disk), "tmpfs", f"size={disk_mb}m,mode=0700")
        except OSError as exc:
            raise SandboxError(f"cannot mount a {disk_mb} MB tmpfs for disk_mb: {exc}") from exc
    dirs.upper.mkdir()
    dirs.work.mkdir()
    # the root directory is the upper's: the sandbox's root owns it (0755, as in Docker)
    os.chown(dirs.upper, idmap.host(0), idmap.host(0))
    os.chmod(dirs.upper, 0o755)
    opened: list[int] = []
    try:
        options = _options(dirs, layers, idmap.userns_fd(), opened)
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


def _options(dirs: RootfsDirs, layers: Sequence[Path], userns_fd: int, opened: list[int]) -> str:
    """Overlay mount options naming every directory by a descriptor of ours."""
    lowers = []
    for layer in reversed(layers):
        fd = idmapped_clone(str(layer), userns_fd)
        opened.append(fd)
        lowers.append(f"/proc/self/fd/{fd}")
    rest = []
    for path in (dirs.upper, dirs.work):
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        opened.append(fd)
        rest.append(f"/proc/self/fd/{fd}")
    text = f"lowerdir={':'.join(lowers)},upperdir={rest[0]},workdir={rest[1]}"
    if len(text) > _MAX_OPTIONS:
        raise OSError(f"{len(layers)} layers do not fit in one overlay mount; squash the image")
    return text


def bind_mounts(files: SandboxFiles, mounts: Sequence[Mount]) -> None:
    """Bind each host path of ``mounts`` into the mounted root of ``files`` (targets
    resolved inside it, never through its links to the host), read-only where asked.

    Raises:
        SandboxError: a target cannot be made or the kernel refused a bind.
    """
    for spec in mounts:
        target = spec.target
        try:
            if spec.source.is_dir():
                fd = files.open_dir(target, create=True)
            else:
                fd = files.open_file(target, create=True)
        except OSError as exc:
            raise SandboxError(f"cannot make the mount point {target}: {exc}") from exc
        try:
            mount(str(spec.source), f"/proc/self/fd/{fd}", "", "", _MS_BIND | _MS_REC)
            if spec.read_only:  # the fd is the directory under the mount: open it anew
                top = files.open_dir(target) if spec.source.is_dir() else files.open_file(target)
                try:
                    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
                    mount("", f"/proc/self/fd/{top}", "", "", flags)
                finally:
                    os.close(top)
        except OSError as exc:
            raise SandboxError(f"cannot bind {spec.source} at {target}: {exc}") from exc
        finally:
            os.close(fd)


def unmount_rootfs(dirs: RootfsDirs) -> None:
    """Detach the overlay (with what is bound into it) and the disk tmpfs (either may be
    missing); remove the mount point."""
    for target in (dirs.merged, dirs.disk):
        while _is_mountpoint(target):
            try:
                umount(str(target))
            except OSError:
                break
    with contextlib.suppress(OSError):
        dirs.merged.rmdir()


def _is_mountpoint(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return os.path.ismount(path)
    return False
