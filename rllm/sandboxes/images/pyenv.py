"""Offline ``python:3.X`` images: a Debian base with the runtime libraries, plus this
host's pyenv CPython of that version laid out as the official image has it.

The official image builds CPython into ``/usr/local`` (``/usr/local/bin/python3.X``,
``python3``, ``python``, ``pip3``, ``pip``; ``/usr/local/lib/python3.X``; libpython in
``/usr/local/lib``, found through ``ldconfig``) on ``debian:<suite>-slim`` with the
libraries it links installed from Debian. Here the CPython is pyenv's build of the same
version (``$PYENV_ROOT/versions/3.X.Y``, built on this Debian bookworm host), copied in
as the official image's build leaves it: test directories, ``*.pyc`` and ``libpython*.a``
removed, ``site-packages`` holding only pip (and setuptools and wheel where the official
image has them), and every path naming the pyenv prefix rewritten to ``/usr/local``
(scripts' shebangs, ``sysconfig`` data), the binaries' RUNPATH dropped and
``/etc/ld.so.cache`` written as ``ldconfig`` would. Only the versions pyenv has are offered;
bullseye is refused (its glibc 2.31 is older than the 2.35 the host's builds need).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rllm.sandboxes.errors import ImageError, SandboxUnavailableError

__all__ = [
    "PYTHON_SUITES",
    "PythonBuild",
    "install_python",
    "python_builds",
    "python_images",
    "runtime_packages",
]

PYTHON_SUITES = ("bookworm", "trixie")
"""Debian suites the pyenv builds run on (the host's glibc 2.36 or newer)."""

DEFAULT_SUITE = "bookworm"
"""The suite of ``python:3.X`` and ``python:3.X-slim`` (the official image's until 3.14)."""

_RUNTIME = {
    "bookworm": "libssl3 libreadline8 libtirpc3",
    "trixie": "libssl3t64 libreadline8t64 libtirpc3t64",
}
_COMMON = (
    "ca-certificates netbase tzdata libbz2-1.0 libexpat1 libffi8 liblzma5 libncursesw6 "
    "libnsl2 libsqlite3-0 libuuid1 zlib1g"
)

_SITE_PACKAGES = ("pip", "setuptools", "wheel", "pkg_resources", "_distutils_hack")
"""What the official image leaves in site-packages (setuptools and wheel up to 3.11)."""
_SITE_FILES = ("distutils-precedence.pth", "easy_install.py", "README.txt")
_BIN = re.compile(r"^(python|pip|pydoc|idle|2to3|wheel|easy_install)[0-9.]*(-config|-gdb\.py)?$")

LOCAL_PREFIX = "/usr/local"
RECIPE_REVISION = "2"
"""Bumped when the layout below changes, so stored layers of an older one are not reused."""


@dataclass(frozen=True)
class PythonBuild:
    """One pyenv CPython and the Debian suite an image puts it on."""

    version: str
    """Its full version (``3.12.1``), the image's ``PYTHON_VERSION``."""
    prefix: Path
    """Its pyenv directory (``~/.pyenv/versions/3.12.1``)."""
    suite: str
    """The Debian suite under it."""

    @property
    def minor(self) -> str:
        """``3.12``."""
        return ".".join(self.version.split(".")[:2])

    @property
    def layer_id(self) -> str:
        """The store layer of the copied CPython (with its ``ld.so.cache`` for ``suite``)."""
        return f"python-{self.version}-{self.suite}-r{RECIPE_REVISION}"


def pyenv_root() -> Path:
    """pyenv's directory: ``$PYENV_ROOT``, else ``~/.pyenv``."""
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def python_builds(root: Path | None = None) -> dict[str, Path]:
    """CPython 3 versions pyenv has built here (``3.12.1`` -> its directory), newest last."""
    versions = (root or pyenv_root()) / "versions"
    found = {}
    try:
        entries = list(versions.iterdir())
    except OSError:
        return {}
    for entry in entries:
        if re.fullmatch(r"3\.\d+\.\d+", entry.name) and (entry / "bin" / "python3").exists():
            found[entry.name] = entry
    return dict(sorted(found.items(), key=lambda kv: tuple(int(p) for p in kv[0].split("."))))


def python_images(root: Path | None = None) -> dict[str, PythonBuild]:
    """Every ``python:`` name built offline from pyenv's versions: ``3.X`` and ``3.X.Y``
    (the newest patch of a minor wins ``3.X``), ``3`` and ``latest`` for the newest, each
    bare, ``-slim``, ``-<suite>`` and ``-slim-<suite>`` (bare and ``-slim`` are bookworm)."""
    builds = python_builds(root)
    tags: dict[str, tuple[str, Path]] = {}
    for version, prefix in builds.items():
        tags[version] = (version, prefix)
        tags[".".join(version.split(".")[:2])] = (version, prefix)
    if builds:
        newest = next(reversed(builds.items()))
        tags["3"] = tags["latest"] = newest
    images = {}
    for tag, (version, prefix) in tags.items():
        for suite in PYTHON_SUITES:
            variants = [f"-{suite}", f"-slim-{suite}"]
            if suite == DEFAULT_SUITE:
                variants += ["", "-slim"]
            for variant in variants:
                if tag == "latest" and variant:  # python:slim, python:bookworm, ...
                    name = f"python:{variant.removeprefix('-')}"
                else:
                    name = f"python:{tag}{variant}"
                images[name] = PythonBuild(version, prefix, suite)
    return images


def runtime_packages(suite: str) -> list[str]:
    """Debian packages of the libraries CPython links (``ssl``, ``sqlite3``, ``ctypes``,
    ``readline``...) and the official image's ``ca-certificates netbase tzdata``."""
    return sorted((_COMMON + " " + _RUNTIME[suite]).split())


def runtime_layer_id(suite: str) -> str:
    """The debootstrap layer of ``suite`` with ``runtime_packages`` included."""
    digest = hashlib.sha256(" ".join(runtime_packages(suite)).encode()).hexdigest()[:8]
    return f"debootstrap-{suite}-minbase-python-{digest}"


def image_env(build: PythonBuild, path: str) -> dict[str, str]:
    """The official image's environment: ``/usr/local/bin`` first, ``LANG``,
    ``PYTHON_VERSION``."""
    rest = [p for p in path.split(":") if p != f"{LOCAL_PREFIX}/bin"]
    return {
        "PATH": ":".join([f"{LOCAL_PREFIX}/bin", *rest]),
        "LANG": "C.UTF-8",
        "PYTHON_VERSION": build.version,
    }


def install_python(build: PythonBuild, target: Path) -> None:
    """Copy ``build`` into the layer directory ``target`` at ``/usr/local``, relocated."""
    minor = build.minor
    src, dst = build.prefix, target / LOCAL_PREFIX.strip("/")
    old = str(build.prefix).encode()
    (dst / "bin").mkdir(parents=True)
    for entry in sorted((src / "bin").iterdir()):
        if _BIN.match(entry.name):
            _copy(entry, dst / "bin" / entry.name, old)
    (dst / "lib").mkdir()
    for entry in sorted((src / "lib").iterdir()):
        if entry.name.startswith("libpython") and not entry.name.endswith(".a"):
            _copy(entry, dst / "lib" / entry.name, old)
        elif entry.name == "pkgconfig":
            _copy_tree(entry, dst / "lib" / entry.name, old)
    stdlib = src / "lib" / f"python{minor}"
    _copy_tree(stdlib, dst / "lib" / f"python{minor}", old, site=stdlib / "site-packages")
    if (src / "include").is_dir():
        _copy_tree(src / "include", dst / "include", old)


def _copy_tree(src: Path, dst: Path, old: bytes, site: Path | None = None) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copystat(src, dst)
    for entry in sorted(src.iterdir()):
        name = entry.name
        if src == site and not (
            name.startswith(_SITE_PACKAGES) or name in _SITE_FILES
        ):  # the host's own packages and .pth hooks stay on the host
            continue
        if entry.is_dir() and not entry.is_symlink():
            if name in ("test", "tests", "idle_test", "__pycache__"):
                continue
            _copy_tree(entry, dst / name, old, site)
        elif not name.endswith((".pyc", ".pyo")) and not re.match(r"libpython.*\.a$", name):
            _copy(entry, dst / name, old)


def _copy(src: Path, dst: Path, old: bytes) -> None:
    """One file or symlink, with the pyenv prefix rewritten to ``/usr/local``: in text
    (shebangs, ``sysconfig`` data); in an ELF file only its RUNPATH is dropped (libpython
    is found through ``ld.so.cache``, as in the official image). Strings compiled into the
    binaries stay: rewriting them in place breaks the linker's shared string tails (the
    version ``3.12.1`` is the tail of ``.../versions/3.12.1``), and CPython finds its
    prefix from the executable's location."""
    if src.is_symlink():
        link = os.readlink(src).encode()
        os.symlink(link.replace(old, LOCAL_PREFIX.encode()).decode(), dst)
        return
    data = src.read_bytes()
    elf = data.startswith(b"\x7fELF")
    if old in data and not elf:
        data = data.replace(old, LOCAL_PREFIX.encode())
    dst.write_bytes(data)
    os.chmod(dst, stat.S_IMODE(src.stat().st_mode))
    if elf and old in data:
        _drop_runpath(dst)


def _drop_runpath(path: Path) -> None:
    patchelf = shutil.which("patchelf")
    if patchelf is None:
        raise SandboxUnavailableError(
            "patchelf is not installed; it drops pyenv's RUNPATH from the CPython of an "
            "offline python image: apt-get install -y patchelf"
        )
    proc = subprocess.run(
        [patchelf, "--remove-rpath", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ImageError(f"patchelf --remove-rpath {path} failed: {proc.stderr.strip()}")
