"""Base images from Debian's packages: ``debootstrap --variant=minbase`` into a layer.

When no image registry is reachable, ``FROM debian:bookworm`` resolves to a root
filesystem built here once (about 10-30 s, 206 MB) and kept in the image store, and
``python:3.X[-slim][-<suite>]`` to one with CPython's runtime libraries plus this host's
pyenv build of 3.X in ``/usr/local`` (``images.pyenv``). ``python:3.11`` comes from pyenv
too when pyenv has 3.11 (the official image's layout); otherwise Debian's python3 (3.11)
recipe of ``images.derived`` stands in.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rllm.sandboxes.errors import ImageError, SandboxUnavailableError
from rllm.sandboxes.images.pull import CMD_LABEL
from rllm.sandboxes.images.pyenv import (
    PythonBuild,
    image_env,
    install_python,
    python_images,
    runtime_layer_id,
    runtime_packages,
)
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage

__all__ = ["BASE_IMAGES", "DEBIAN_MIRROR", "PYTHON_IMAGES", "ensure_base"]

DEBIAN_MIRROR = "http://deb.debian.org/debian"
"""Where debootstrap fetches packages from."""

_RELEASES = {"bullseye": ("11",), "bookworm": ("12",), "trixie": ("13",)}
"""Suites debootstrap builds, and their major numbers (not point releases: debootstrap
installs the suite's current one)."""

DEBIAN_IMAGES: dict[str, str] = {
    f"debian:{tag}{variant}": suite
    for suite, numbers in _RELEASES.items()
    for tag in (suite, *numbers)
    for variant in ("", "-slim")
}
"""``debian:`` names built by debootstrap -> the Debian suite."""

PYTHON_IMAGES: dict[str, PythonBuild] = python_images()
"""``python:`` names built from pyenv's CPythons (those this host has) -> the build."""

BASE_IMAGES: dict[str, str] = {
    **DEBIAN_IMAGES,
    **{name: build.suite for name, build in PYTHON_IMAGES.items()},
}
"""Image names built here without a registry -> the Debian suite under them."""

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
    python = PYTHON_IMAGES.get(name)
    if python is not None:
        wanted = [runtime_layer_id(python.suite), python.layer_id]
        if found is not None and [layer.name for layer in found.layers] == wanted:
            return found  # else pyenv's version or the recipe changed since: rebuild
        return _ensure_python(store, name, python, mirror)
    if found is not None:
        return found
    layer_id = f"debootstrap-{suite}-minbase"
    _ensure_debootstrap(store, layer_id, suite, mirror, name)
    return store.put(name, [layer_id], ImageConfig(env={"PATH": _PATH}))


def _ensure_python(store: ImageStore, name: str, build: PythonBuild, mirror: str) -> LocalImage:
    """Debian with CPython's runtime libraries, then pyenv's CPython in its own layer
    (shared by every alias of one version and suite)."""
    base_id = runtime_layer_id(build.suite)
    _ensure_debootstrap(store, base_id, build.suite, mirror, name, runtime_packages(build.suite))
    with open(store.root / f".{build.layer_id}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not store.has_layer(build.layer_id):
            target = store.new_layer_dir()
            try:
                install_python(build, target)
                _ld_cache(store, store.layer_path(base_id), target)
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
            store.commit_layer(target, build.layer_id)
    config = ImageConfig(env=image_env(build, _PATH))
    return store.put(name, [base_id, build.layer_id], config, {CMD_LABEL: '["python3"]'})


def _ld_cache(store: ImageStore, base: Path, layer: Path) -> None:
    """Write ``layer``'s ``/etc/ld.so.cache`` as ``ldconfig`` in the image would: run on a
    hard-linked merge of ``base`` and ``layer`` (so libpython in /usr/local/lib is found)."""
    with tempfile.TemporaryDirectory(prefix=".tmp-ld-", dir=store.layers_dir) as merged:
        for source in (base, layer):
            subprocess.run(["cp", "-al", f"{source}/.", merged], check=True)
        proc = subprocess.run(
            ["ldconfig", "-X", "-r", merged], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise ImageError(f"ldconfig in the python image failed: {proc.stderr.strip()}")
        (layer / "etc").mkdir(exist_ok=True)
        shutil.copyfile(os.path.join(merged, "etc", "ld.so.cache"), layer / "etc" / "ld.so.cache")


def _ensure_debootstrap(
    store: ImageStore,
    layer_id: str,
    suite: str,
    mirror: str,
    name: str,
    include: list[str] | None = None,
) -> None:
    if store.has_layer(layer_id):
        return
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxUnavailableError(
            f"debootstrap is not installed; it builds the base image {name!r} from Debian's "
            f"packages: apt-get install -y debootstrap"
        )
    with open(store.root / f".{layer_id}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per machine; the others wait for it
        if not store.has_layer(layer_id):
            target = store.new_layer_dir()
            _debootstrap(debootstrap, suite, target, mirror, include or [])
            store.commit_layer(target, layer_id)


def _debootstrap(
    debootstrap: str, suite: str, target: Path, mirror: str, include: list[str]
) -> None:
    command = [debootstrap, "--variant=minbase", suite, str(target), mirror]
    if include:
        command[1:1] = [f"--include={','.join(include)}"]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ImageError(f"debootstrap {suite} failed (exit {proc.returncode}): {tail}")
