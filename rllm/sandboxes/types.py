"""Contracts of the sandboxes area: what a sandbox is asked for, what running in it
returns, and the two Protocols every backend implements (``Sandbox``, ``SandboxBackend``).

A backend is one module per implementation (``local``, ``docker``, ``daytona``, ``modal``),
registered by name in ``rllm.sandboxes.registry``; one contract test suite runs against
every one of them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "BACKEND_LABEL",
    "CREATED_LABEL",
    "IMAGE_LABEL",
    "OWNER_LABEL",
    "ExecResult",
    "ImageInfo",
    "Mount",
    "NetworkMode",
    "Sandbox",
    "SandboxBackend",
    "SandboxInfo",
    "SandboxSpec",
    "SnapshotInfo",
    "SnapshotStore",
    "cut_output",
    "labels_match",
]

OWNER_LABEL = "rllm.owner"
"""The label that names a sandbox's owner (a run id): what ``reap`` looks for."""

BACKEND_LABEL = "rllm.backend"
"""Set by every backend on what it creates, next to the user's labels."""

IMAGE_LABEL = "rllm.image"
"""The image a sandbox was created from, set beside ``BACKEND_LABEL``."""

CREATED_LABEL = "rllm.created"
"""Unix time a sandbox was created (where the service's listing does not say)."""


class NetworkMode(StrEnum):
    """What a sandbox can reach over the network."""

    NONE = "none"
    """Only its own loopback interface."""
    GATEWAY = "gateway"
    """Its loopback, where the model gateway's port is forwarded; nothing else."""
    HOST = "host"
    """The host's network (image builds that install packages; never an agent's run)."""


class Mount(BaseModel):
    """A host directory or file bound into a sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Path
    """Absolute host path; it must exist."""
    target: str
    """Absolute path inside the sandbox (created if missing)."""
    read_only: bool = True
    """Read-only unless asked otherwise (a host-installed tool, an interpreter)."""

    @field_validator("source")
    @classmethod
    def _existing_source(cls, value: Path) -> Path:
        if not value.is_absolute() or not value.exists():
            raise ValueError(f"mount source {str(value)!r} must be an existing absolute path")
        return value

    @field_validator("target")
    @classmethod
    def _absolute_target(cls, value: str) -> str:
        if not value.startswith("/") or value == "/" or ".." in value.split("/"):
            raise ValueError(f"mount target {value!r} must be an absolute path below /")
        return value


class SandboxSpec(BaseModel):
    """What one sandbox is created from and may do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- what runs ------------------------------------------------------------------
    image: str = "debian:bookworm"
    """An image name the backend's image store knows (a base image, a built task image
    or a snapshot), or an absolute path to a local root filesystem directory."""
    workdir: str = "/workspace"
    """Working directory of ``exec`` when no ``cwd`` is given; created if missing."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of every command, over the image's own."""
    user: str | None = None
    """User commands run as (name or ``uid[:gid]``); None is the image's user (root)."""
    mounts: tuple[Mount, ...] = ()
    """Host paths bound in (read-only by default): a host-installed tool, an interpreter.
    Backends on other machines (daytona, modal) refuse them."""

    # --- limits ---------------------------------------------------------------------
    cpus: float | None = Field(default=None, gt=0)
    """CPU share (1.0 = one core); None is unlimited."""
    memory_mb: int | None = Field(default=None, ge=16)
    """Memory limit; a sandbox over it is killed (out of memory), not the host."""
    pids: int | None = Field(default=1024, ge=8)
    """Most processes alive at once."""
    disk_mb: int | None = Field(default=None, ge=1)
    """Most bytes the sandbox may write (its writable layer)."""
    output_limit_bytes: int = Field(default=1_000_000, ge=1024)
    """Stdout and stderr of one ``exec`` beyond this are cut, with a marker."""

    # --- network and lifetime ---------------------------------------------------------
    network: NetworkMode = NetworkMode.NONE
    """What the sandbox can reach."""
    gateway_url: str | None = None
    """With ``network=gateway``: the gateway's URL on the host (``http://127.0.0.1:8400``).
    Inside the sandbox the same URL reaches it, and nothing else answers."""
    lifetime_s: float | None = Field(default=3600.0, gt=0)
    """The sandbox is closed this long after creation, whatever runs; None: never."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form labels; ``rllm.owner`` names the run that owns it (for ``reap``)."""

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"workdir {value!r} must be an absolute path inside the sandbox")
        return value

    @field_validator("gateway_url")
    @classmethod
    def _http_gateway(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"gateway_url {value!r} must be an http(s) URL")
        return value

    def model_post_init(self, _context: object) -> None:
        if self.network == NetworkMode.GATEWAY and not self.gateway_url:
            raise ValueError("network='gateway' needs gateway_url (the gateway's URL on the host)")


def cut_output(data: bytes, limit: int, total: int | None = None) -> str:
    """Decode ``data``, cut at ``limit`` bytes with a marker that says how much was cut.

    ``total`` is the stream's full length when only its first bytes were kept (a reader
    that drains and discards the rest); default ``len(data)``.
    """
    total = len(data) if total is None else max(total, len(data))
    if total <= limit:
        return data.decode("utf-8", "replace")
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[rllm: output cut, {total - limit} of {total} bytes dropped]\n"


def labels_match(labels: Mapping[str, str], wanted: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` has every key and value of ``wanted`` (None or empty matches all)."""
    return not wanted or all(labels.get(k) == v for k, v in wanted.items())


@dataclass(frozen=True)
class ExecResult:
    """How one command in a sandbox ended. A failing command is a result, not an error."""

    stdout: str
    """Standard output, cut at the spec's ``output_limit_bytes`` with a marker."""
    stderr: str
    """Standard error, cut the same way."""
    exit_code: int | None
    """Exit status; None when it did not exit by itself (timed out, or the sandbox died)."""
    timed_out: bool
    """True when the timeout killed the command and everything it started."""
    duration_s: float
    """Wall-clock seconds."""
    truncated: bool = False
    """True when stdout or stderr was cut."""
    error: str | None = None
    """Why it ended abnormally (``timed out after 5 s``, ``sandbox died: ...``); else None."""

    @property
    def ok(self) -> bool:
        """Exited 0."""
        return self.exit_code == 0


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as a backend lists it (``sandbox ls``, ``reap``)."""

    id: str
    """The backend's id for it."""
    backend: str
    """Backend name."""
    image: str
    """The image it was created from."""
    labels: Mapping[str, str]
    """Its labels (``rllm.owner`` among them)."""
    created_at: float
    """Unix time of creation."""
    alive: bool = True
    """Whether it still runs."""

    @property
    def age_s(self) -> float:
        """Seconds since creation."""
        return max(0.0, time.time() - self.created_at)


@dataclass(frozen=True)
class ImageInfo:
    """An image a backend can create sandboxes from."""

    name: str
    """Its name (``debian:bookworm``, a built task image, a snapshot)."""
    backend: str
    """Backend name."""
    id: str
    """Content id (a hash of its layers) or the backend's image id."""
    size_bytes: int | None = None
    """Bytes on disk when known."""
    created_at: float | None = None
    """Unix time it was made."""


@dataclass(frozen=True)
class SnapshotInfo:
    """A frozen sandbox that later sandboxes start from (``SandboxSpec(image=info.image)``)."""

    name: str
    """Its name in the snapshot registry."""
    backend: str
    """Backend name."""
    image: str
    """What to put in ``SandboxSpec.image`` to start from it."""
    key: str | None = None
    """Content hash it was built for (backend, base image, build steps, install script)."""
    created_at: float = field(default_factory=time.time)
    """Unix time it was taken."""
    ttl_s: float | None = None
    """Seconds it stays valid; None is forever."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of the sandbox it was taken from."""

    @property
    def expired(self) -> bool:
        """Past its TTL."""
        return self.ttl_s is not None and time.time() > self.created_at + self.ttl_s


@runtime_checkable
class Sandbox(Protocol):
    """One live sandbox. ``close`` is idempotent, and runs at garbage collection and at
    process exit too; everything else raises ``SandboxClosedError`` once closed."""

    @property
    def id(self) -> str:
        """The backend's id for it."""
        ...

    @property
    def spec(self) -> SandboxSpec:
        """What it was created from."""
        ...

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
    ) -> ExecResult:
        """Run ``cmd`` (a shell string, run by ``/bin/sh -c``, or an argv list).

        A timeout kills the command and every process it started. A sandbox that dies
        mid-command gives a result with ``error`` saying so, not an exception.
        """
        ...

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file inside the sandbox (parents created)."""
        ...

    async def read_file(self, path: str) -> bytes:
        """Read a file inside the sandbox; ``FileNotFoundError`` when it is not there."""
        ...

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy a host directory's contents into ``remote`` (created)."""
        ...

    async def download_dir(self, remote: str, local: Path) -> None:
        """Copy ``remote``'s contents into a host directory (created)."""
        ...

    async def is_alive(self) -> bool:
        """Whether it still runs."""
        ...

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Freeze its filesystem as ``name``; later sandboxes start from it."""
        ...

    async def close(self) -> None:
        """Stop every process and remove what it wrote. Idempotent."""
        ...


class SnapshotStore(Protocol):
    """A backend's snapshots."""

    async def create(self, sandbox: Sandbox, name: str) -> SnapshotInfo:
        """Freeze ``sandbox`` as ``name`` (replacing one of that name)."""
        ...

    async def all(self) -> list[SnapshotInfo]:
        """Every snapshot the backend holds."""
        ...

    async def delete(self, name: str) -> None:
        """Remove one; ``SnapshotError`` when there is none of that name."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """Creates sandboxes of one kind (local, docker, daytona, modal)."""

    name: str
    """Registry name."""

    @property
    def snapshots(self) -> SnapshotStore:
        """Its snapshots."""
        ...

    async def create(self, spec: SandboxSpec) -> Sandbox:
        """A running sandbox for ``spec``; ``ImageError`` for an image it does not know."""
        ...

    async def build_image(self, context_dir: Path, name: str | None = None) -> ImageInfo:
        """Build the Dockerfile in ``context_dir`` (its build context) as image ``name``
        (default: a name from the content hash); each step cached by content."""
        ...

    async def images(self) -> list[ImageInfo]:
        """Images it can create sandboxes from."""
        ...

    async def sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Its sandboxes (of this process and others), optionally those with ``labels``."""
        ...

    async def reap(
        self, labels: Mapping[str, str] | None = None, older_than_s: float | None = None
    ) -> list[str]:
        """Close every sandbox matching ``labels`` (and older than ``older_than_s``);
        returns the ids closed. Finds sandboxes leaked by dead processes too."""
        ...

    async def aclose(self) -> None:
        """Close the sandboxes this backend object created and release its clients."""
        ...
