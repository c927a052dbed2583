"""The Docker Engine client of the docker backend, and the boundary where the SDK's
errors become the sandboxes area's own (``docker_errors``)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from rllm.sandboxes.errors import (
    ImageError,
    SandboxClosedError,
    SandboxError,
    SandboxUnavailableError,
)

__all__ = ["START_HINT", "connect", "docker_errors", "remove_container"]

START_HINT = (
    "start it with `infra/docker/start` (then set RLLM_SANDBOX_DOCKER_URL to the URL it "
    "prints), or run `dockerd --bridge=none --iptables=false` as root"
)
"""How to start the daemon this backend needs; part of every 'unreachable' message."""

_POOL_SIZE = 64


def _sdk() -> Any:
    try:
        import docker  # type: ignore[import-untyped]  # the SDK ships no type hints
    except ImportError as exc:
        raise SandboxUnavailableError(
            "the docker backend needs the docker SDK, which is not installed: "
            "pip install 'rllm-stream[sandboxes]'"
        ) from exc
    return docker


def _probe_unix(url: str, where: str) -> None:
    """Connect to a ``unix://`` daemon socket once ourselves: a clear error when nobody
    listens (the SDK would leak its socket on that failure)."""
    if not url.startswith(("unix://", "http+unix://")):
        return
    path = url.split("://", 1)[1]
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(5.0)
        probe.connect(path)
    except OSError as exc:
        raise SandboxUnavailableError(
            f"the Docker daemon at {where} does not answer: {path}: {exc.strerror or exc}; "
            f"{START_HINT}"
        ) from exc
    finally:
        probe.close()


def connect(url: str | None) -> Any:
    """A ``docker.DockerClient`` for ``url`` (None: ``DOCKER_HOST`` or the default
    socket) that has answered a ping.

    Raises:
        SandboxUnavailableError: the SDK is missing or the daemon does not answer.
    """
    docker = _sdk()
    where = url or "DOCKER_HOST / unix:///var/run/docker.sock"
    _probe_unix(url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock", where)
    client = None
    try:
        if url:
            client = docker.DockerClient(base_url=url, max_pool_size=_POOL_SIZE, timeout=120)
        else:
            client = docker.from_env(max_pool_size=_POOL_SIZE, timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        if client is not None:
            client.close()
        raise SandboxUnavailableError(
            f"the Docker daemon at {where} does not answer ({exc}); {START_HINT}"
        ) from exc
    return client


@contextmanager
def docker_errors(what: str, *, image: str | None = None) -> Iterator[None]:
    """Re-raise the docker SDK's errors from the block as ``SandboxError``s saying ``what``
    was being done: an unknown image is ``ImageError``, a removed container
    ``SandboxClosedError``, a lost daemon ``SandboxUnavailableError``."""
    docker = _sdk()
    errors = docker.errors
    try:
        yield
    except errors.ImageNotFound as exc:
        name = image or "?"
        raise ImageError(
            f"{what}: the Docker daemon has no image {name!r} and none could be imported; "
            f"import one with `rllm-cli sandbox image import {name} ROOTFS.tar` ({exc})"
        ) from exc
    except errors.NotFound as exc:
        raise SandboxClosedError(f"{what}: the container is gone ({exc.explanation})") from exc
    except errors.APIError as exc:
        raise SandboxError(f"{what}: the Docker daemon refused: {exc.explanation or exc}") from exc
    except errors.DockerException as exc:
        raise SandboxUnavailableError(
            f"{what}: the Docker daemon is unreachable ({exc}); {START_HINT}"
        ) from exc
    except OSError as exc:  # the socket went away mid-call (requests wraps most of these)
        raise SandboxUnavailableError(
            f"{what}: lost the Docker daemon ({exc}); {START_HINT}"
        ) from exc


def remove_container(client: Any, container_id: str, cleanups: list[Callable[[], None]]) -> None:
    """Force-remove a container (nothing if it is gone) and run ``cleanups``; never raises."""
    for cleanup in cleanups:
        with suppress(Exception):
            cleanup()
    with suppress(Exception):
        client.api.remove_container(container_id, force=True, v=True)
