"""The ``docker`` sandbox backend: sandboxes as containers of a local Docker Engine
(``network_mode`` none or host only), images imported from the local image store."""

from __future__ import annotations

from rllm.sandboxes.docker.backend import DockerBackend, DockerSnapshots
from rllm.sandboxes.docker.sandbox import DockerSandbox

__all__ = ["DockerBackend", "DockerSandbox", "DockerSnapshots"]
