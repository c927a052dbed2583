"""Errors of the sandboxes area, under the project's root ``RllmError``.

::

    RllmError
    └── SandboxError(RuntimeError)          a sandbox operation failed
        ├── SandboxUnavailableError         a backend's tool, daemon or credentials are missing
        ├── SandboxClosedError              the sandbox is closed or died
        ├── ImageError(LookupError)         an unknown image, or a broken image store
        │   ├── DockerfileError(ValueError) a Dockerfile refused: names instruction and line
        │   └── PullError                   a pull failed: names reference, registry, layer
        │       └── RegistryUnreachableError    the registry could not be reached at all
        └── SnapshotError                   a snapshot could not be taken, found or removed

A command that runs and fails inside a sandbox is an ``ExecResult`` with its exit code,
never one of these.
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = [
    "DockerfileError",
    "ImageError",
    "PullError",
    "RegistryUnreachableError",
    "SandboxClosedError",
    "SandboxError",
    "SandboxUnavailableError",
    "SnapshotError",
]


class SandboxError(RllmError, RuntimeError):
    """A sandbox could not be created, used or closed."""


class SandboxUnavailableError(SandboxError):
    """A backend cannot run here: its tool (bubblewrap), daemon (dockerd) or credentials
    are missing. The message says what to install, start or set."""


class SandboxClosedError(SandboxError):
    """The sandbox was closed, or died; nothing more can run in it."""


class ImageError(SandboxError, LookupError):
    """An image that no store knows, or an image store in a state we cannot use."""

    def __str__(self) -> str:  # LookupError subclasses KeyError's cousins: keep it plain.
        return str(self.args[0]) if self.args else ""


class DockerfileError(ImageError, ValueError):
    """A Dockerfile instruction we refuse: the message names the instruction and its line.

    ``problems`` holds each problem's own message when one error reports several (a
    Dockerfile is read to its end, so ``bench check`` can list them all).
    """

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems or (message,)


class PullError(ImageError):
    """An image could not be pulled: missing, refused, corrupt or for another platform.
    The message names the reference, the registry and, where one is at fault, the layer."""


class RegistryUnreachableError(PullError):
    """No answer from the registry (no route, no such host, connection refused): the
    offline base images may stand in for the image when it has one."""


class SnapshotError(SandboxError):
    """A snapshot could not be taken, found or deleted."""
