"""Image references read as Docker reads them (``distribution/reference``): a registry
host, a repository path, a tag and a digest, with Docker Hub's defaults filled in.

``python:3.11`` is ``docker.io/library/python:3.11``; ``ghcr.io/o/r`` is
``ghcr.io/o/r:latest``; ``127.0.0.1:5000/x@sha256:...`` names a digest. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

__all__ = ["DOCKER_HUB", "ImageReference", "is_loopback", "parse_reference"]

DOCKER_HUB = "docker.io"
"""Docker Hub's canonical host name in references."""

_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")
_HUB_API = "registry-1.docker.io"
"""The host Docker Hub's registry API answers on."""

_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$")
_HOST = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$"
)


@dataclass(frozen=True)
class ImageReference:
    """One image reference, fully qualified."""

    registry: str
    """Registry host[:port] as written (``docker.io`` for Docker Hub)."""
    repository: str
    """Repository path (``library/python``, ``some/image``)."""
    tag: str | None
    """Tag; None only when a digest is given without one."""
    digest: str | None = None
    """``sha256:<hex>`` when pinned."""

    @property
    def is_docker_hub(self) -> bool:
        """Whether it lives on Docker Hub."""
        return self.registry == DOCKER_HUB

    @property
    def api_host(self) -> str:
        """Where the registry API answers (Docker Hub's is ``registry-1.docker.io``)."""
        return _HUB_API if self.is_docker_hub else self.registry

    @property
    def familiar(self) -> str:
        """The short name Docker prints: ``python:3.11``, ``ghcr.io/o/r:v1``."""
        if self.is_docker_hub:
            return self.repository.removeprefix("library/") + self._suffix()
        return f"{self.registry}/{self.repository}{self._suffix()}"

    @property
    def canonical(self) -> str:
        """Every part spelled out: ``docker.io/library/python:3.11``."""
        return f"{self.registry}/{self.repository}{self._suffix()}"

    def _suffix(self) -> str:
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def on(self, registry: str) -> ImageReference:
        """The same repository, tag and digest on another registry (a mirror)."""
        return replace(self, registry=registry)

    def __str__(self) -> str:
        return self.familiar


def parse_reference(text: str) -> ImageReference:
    """Read ``text`` as Docker does.

    The first path component is a registry host when it has a ``.`` or a ``:`` or is
    ``localhost``; otherwise the image is on Docker Hub, under ``library/`` when the
    path has one component. No tag and no digest means ``:latest``.

    Raises:
        ValueError: not a valid reference (upper case in the repository, an empty
            component, a bad tag or digest); the message names the value.
    """
    original = text
    if not text or text != text.strip():
        raise ValueError(f"{original!r} is not an image reference")
    text, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ValueError(f"{original!r}: {digest!r} is not a digest (sha256:<64 hex>)")
    if digest.startswith("sha256:") and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ValueError(f"{original!r}: a sha256 digest is 64 lower-case hex digits")
    path, tag = text, None
    last = text.rpartition("/")[2]
    if ":" in last:
        path, _, tag = text.rpartition(":")
        if not _TAG.match(tag):
            raise ValueError(f"{original!r}: {tag!r} is not a valid tag")
    first, slash, rest = path.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.match(first):
            raise ValueError(f"{original!r}: {first!r} is not a registry host[:port]")
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, path
    if registry in _HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    for component in repository.split("/"):
        if not _COMPONENT.match(component):
            why = "upper case" if component != component.lower() else "an invalid component"
            raise ValueError(f"{original!r}: repository {repository!r} has {why} ({component!r})")
    if len(repository) > 255:
        raise ValueError(f"{original!r}: the repository name is longer than 255 characters")
    if tag is None and not digest:
        tag = "latest"
    return ImageReference(registry, repository, tag, digest or None)


def is_loopback(registry: str) -> bool:
    """Whether ``registry`` (host[:port]) is this machine: Docker trusts those over
    plain HTTP without being told, as it does ``127.0.0.0/8``."""
    host = registry
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
