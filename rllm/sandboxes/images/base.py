"""Base images from Debian's packages: ``debootstrap --variant=minbase`` into a layer.

No image registry is reachable on these machines, so ``FROM debian:bookworm`` resolves to
a root filesystem built here once (about 10-30 s, 206 MB) and kept in the image store.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from rllm.sandboxes.errors import ImageError, SandboxUnavailableError
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage

__all__ = ["BASE_IMAGES", "DEBIAN_MIRROR", "ensure_base"]

DEBIAN_MIRROR = "http://deb.debian.org/debian"
"""Where debootstrap fetches packages from."""

_RELEASES = {"bullseye": ("11",), "bookworm": ("12",), "trixie": ("13",)}
"""Suites debootstrap builds, and their major numbers (not point releases: debootstrap
installs the suite's current one)."""

BASE_IMAGES: dict[str, str] = {
    f"debian:{tag}{variant}": suite
    for suite, numbers in _RELEASES.items()
    for tag in (suite, *numbers)
    for variant in ("", "-slim")
}
"""Image names built by debootstrap -> the Debian suite."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def ensure_base(store: ImageStore, name: str, mirror: str = DEBIAN_MIRROR) -> LocalImage:
    """The base image ``name``, built by debootstrap the first time it is asked for.

    Raises:
        ImageError: ``name`` is not a base image this module builds.
        SandboxUnavailableError: debootstrap is not installed.
    """
    suite = BASE_IMAGES.get(name)
    if suite is None:
        known = ", ".join(BASE_IMAGES)
        raise ImageError(f"{name!r} is not a base image built here; known: {known}")
    found = store.find(name)
    if found is not None:
        return found
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxUnavailableError(
            f"debootstrap is not installed; it builds the base image {name!r} from Debian's "
            f"packages: apt-get install -y debootstrap"
        )
    layer_id = f"debootstrap-{suite}-minbase"
    with open(store.root / f".{layer_id}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per machine; the others wait for it
        if not store.has_layer(layer_id):
            target = store.new_layer_dir()
            _debootstrap(debootstrap, suite, target, mirror)
            store.commit_layer(target, layer_id)
    return store.put(name, [layer_id], ImageConfig(env={"PATH": _PATH}))


def _debootstrap(debootstrap: str, suite: str, target: Path, mirror: str) -> None:
    command = [debootstrap, "--variant=minbase", suite, str(target), mirror]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ImageError(f"debootstrap {suite} failed (exit {proc.returncode}): {tail}")
