"""Built-in derived images: names a Dockerfile's FROM commonly uses (``python:3.11-slim``,
``buildpack-deps:bookworm``, ``ghcr.io/astral-sh/uv:0.8.14``) as recipes on top of a
debootstrapped base image.

When no registry answers, ``FROM buildpack-deps:bookworm`` is built locally by the
Dockerfile builder from a recipe below, once, and kept in the image store under that
name. Aliases of one recipe share its layers (the cache is by content). ``python:`` names
come from pyenv's CPythons (``images.pyenv``, built by ``images.base``); the recipe here
(Debian bookworm's ``python3``, which is 3.11) stands in for ``python:3.11`` and
``python:3`` only where pyenv has no 3.11. Other Python versions and other distributions
are refused with a hint, naming what is built offline, instead of being built wrong.
"""

from __future__ import annotations

import re

from rllm.sandboxes.images.base import DEBIAN_IMAGES, PYTHON_IMAGES

__all__ = ["DERIVED_IMAGES", "derived_recipe", "normalize_name", "offline_images", "refusal"]

_PYTHON = """\
FROM debian:bookworm
ARG DEBIAN_FRONTEND=noninteractive
ENV LANG=C.UTF-8
RUN apt-get update \\
 && apt-get install -y --no-install-recommends ca-certificates python3 python3-pip python3-venv \\
 && ln -sf /usr/bin/python3 /usr/local/bin/python \\
 && { [ -e /usr/bin/pip ] || ln -sf /usr/bin/pip3 /usr/local/bin/pip; } \\
 && rm -f /usr/lib/python3.*/EXTERNALLY-MANAGED \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
CMD ["python3"]
"""
"""The official image's promise as far as Debian gives it: ``python``, ``python3``,
``pip`` and ``venv``, certificates for pip, ``LANG=C.UTF-8``; pip installs system-wide
as in the official image (the EXTERNALLY-MANAGED marker is removed); the apt lists are
emptied as there, so a Dockerfile's ``apt-get install`` needs its ``apt-get update``."""

_CURL = """\
FROM debian:bookworm
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \\
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg netbase wget \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
"""

_SCM = _CURL.replace(
    "netbase wget", "netbase wget git openssh-client procps"
)  # buildpack-deps:*-scm without mercurial and subversion

_BUILDPACK = _CURL.replace(
    "netbase wget",
    "netbase wget git openssh-client procps build-essential autoconf automake libtool "
    "pkg-config file bzip2 xz-utils unzip libssl-dev libffi-dev zlib1g-dev",
)

_UV = """\
FROM python:3.11-slim
RUN python3 -m pip download --no-deps --only-binary=:all: --dest /tmp/uv "uv=={version}" \\
 && python3 -m zipfile -e /tmp/uv/uv-{version}-*.whl /tmp/uv/x \\
 && cd /tmp/uv/x/uv-{version}.data/scripts && install -m 0755 uv uvx / && cd / \\
 && rm -rf /tmp/uv /root/.cache
ENTRYPOINT ["/uv"]
"""
"""``ghcr.io/astral-sh/uv:X.Y.Z`` (which Dockerfiles use as ``COPY --from=... /uv /uvx
/bin/``): the same release's ``uv`` and ``uvx`` binaries, taken from its wheel on the
package index (Astral builds both from one release), at the image's paths ``/uv`` and
``/uvx``. Unlike the distroless original, a Debian system sits beside them; a ``COPY
--from`` of the two binaries cannot tell. Only exact versions: a moving tag is refused."""

_UV_NAME = re.compile(r"^ghcr\.io/astral-sh/uv:(?P<version>[0-9]+\.[0-9]+\.[0-9]+)$")

DERIVED_IMAGES: dict[str, str] = {
    **{
        f"python:{version}{variant}": _PYTHON
        for version in ("3.11", "3")
        for variant in ("", "-slim", "-bookworm", "-slim-bookworm")
    },
    "buildpack-deps:bookworm-curl": _CURL,
    "buildpack-deps:bookworm-scm": _SCM,
    "buildpack-deps:bookworm": _BUILDPACK,
}
"""Image name -> the Dockerfile that builds it (on a base image of ``images.base``)."""

_PYTHON_NAME = re.compile(r"^python:(?P<version>[0-9][0-9.]*)?(?P<variant>-.*)?$")


def normalize_name(name: str) -> str:
    """Drop Docker Hub's implicit prefixes: ``docker.io/library/python:3.11`` is
    ``python:3.11``; a name without a tag is ``:latest``."""
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    name = name.removeprefix("library/")
    if ":" not in name.rpartition("/")[2] and "@" not in name:
        name += ":latest"
    return name


def derived_recipe(name: str) -> str | None:
    """The Dockerfile that builds image ``name`` here, or None when there is none.
    ``python:3.11.X`` takes the 3.11 recipe (Debian's 3.11 patch level)."""
    recipe = DERIVED_IMAGES.get(name)
    if uv := _UV_NAME.match(name):
        return _UV.format(version=uv.group("version"))
    match = _PYTHON_NAME.match(name)
    if recipe is None and match and (match.group("version") or "").startswith("3.11."):
        recipe = DERIVED_IMAGES.get(f"python:3.11{match.group('variant') or ''}")
    return recipe


def offline_images() -> str:
    """What is built here without a registry, in one line for error messages."""
    debian = sorted({suite for suite in DEBIAN_IMAGES.values()})
    pythons = sorted(
        {build.minor for build in PYTHON_IMAGES.values()}, key=lambda v: int(v.split(".")[1])
    )
    python = (
        f"python:{{{','.join(pythons)}}}[-slim][-bookworm|-trixie] (pyenv's CPythons), "
        if pythons
        else "python:3.11[-slim] (Debian's python3), "
    )
    return (
        f"debian:{{{','.join(debian)}}}[-slim] (and 11, 12, 13), {python}"
        f"buildpack-deps:bookworm[-curl|-scm], ghcr.io/astral-sh/uv:X.Y.Z (from its wheel)"
    )


def refusal(name: str) -> str | None:
    """Why ``name`` cannot be built here and what to use instead, for names we know;
    None for names we know nothing about."""
    match = _PYTHON_NAME.match(name)
    if name.startswith("python:"):
        version = (match.group("version") if match else None) or "latest"
        variant = (match.group("variant") if match else "") or ""
        if "alpine" in variant or "windows" in variant:
            return f"{name} is not Debian; use FROM python:3.11-slim"
        if "bullseye" in variant:
            return (
                f"{name} cannot be built here: pyenv's CPythons need glibc 2.35 and "
                f"bullseye has 2.31; use -bookworm or -trixie"
            )
        built = sorted({b.version for b in PYTHON_IMAGES.values()}) or ["3.11 (Debian's)"]
        return (
            f"{name} cannot be built here: the Pythons offline are {', '.join(built)} "
            f"(asked for {version}); install another with pyenv on this host, or use "
            f"uv python install in a RUN step"
        )
    if name.startswith("ghcr.io/astral-sh/uv:"):
        return (
            f"{name} is not an exact uv release: uv images are built here from the wheel of "
            f"one version (ghcr.io/astral-sh/uv:0.8.14)"
        )
    distro = name.partition(":")[0].rpartition("/")[2]
    if distro in ("ubuntu", "alpine", "fedora", "centos", "rockylinux", "archlinux"):
        return (
            f"{name} cannot be built here: base images are built with debootstrap from "
            f"Debian's mirror only; use FROM debian:bookworm, or --image-substitute "
            f"{name}=debian:bookworm"
        )
    if name.startswith("debian:"):
        return f"{name} is not a Debian release built here; use FROM debian:bookworm"
    return None
