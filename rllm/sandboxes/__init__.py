"""Sandboxes: where agents edit files and run commands, isolated from the host.

Backends (``local`` bubblewrap over a kernel overlay, ``docker``, ``daytona``, ``modal``)
implement one contract (``rllm.sandboxes.types``); images build without a registry,
snapshots freeze a prepared sandbox, and warm pools keep sandboxes created ahead.
"""

from __future__ import annotations

from rllm.sandboxes.errors import (
    DockerfileError,
    ImageError,
    SandboxClosedError,
    SandboxError,
    SandboxUnavailableError,
    SnapshotError,
)
from rllm.sandboxes.registry import BACKENDS, get_backend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import (
    OWNER_LABEL,
    ExecResult,
    ImageInfo,
    Mount,
    NetworkMode,
    Sandbox,
    SandboxBackend,
    SandboxInfo,
    SandboxSpec,
    SnapshotInfo,
)

__all__ = [
    "BACKENDS",
    "OWNER_LABEL",
    "DockerfileError",
    "ExecResult",
    "ImageError",
    "ImageInfo",
    "Mount",
    "NetworkMode",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxError",
    "SandboxInfo",
    "SandboxSettings",
    "SandboxSpec",
    "SandboxUnavailableError",
    "SnapshotError",
    "SnapshotInfo",
    "get_backend",
]
