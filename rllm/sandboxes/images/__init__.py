"""Images without a registry: a layered store on disk, base images from Debian's
packages, and Dockerfiles applied on top, each step cached by its content hash."""

from __future__ import annotations

from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage

__all__ = ["ImageConfig", "ImageStore", "LocalImage"]
