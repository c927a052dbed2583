"""Images without a registry: a layered store on disk, base images from Debian's
packages, and Dockerfiles applied on top, each step cached by its content hash."""

from __future__ import annotations

from rllm.sandboxes.images.build import build_dockerfile, build_image
from rllm.sandboxes.images.derived import DERIVED_IMAGES
from rllm.sandboxes.images.dockerfile import Instruction, parse_dockerfile
from rllm.sandboxes.images.importer import import_rootfs
from rllm.sandboxes.images.plan import plan_build
from rllm.sandboxes.images.steps import BuildPlan
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage

__all__ = [
    "DERIVED_IMAGES",
    "BuildPlan",
    "ImageConfig",
    "ImageStore",
    "Instruction",
    "LocalImage",
    "build_dockerfile",
    "build_image",
    "import_rootfs",
    "parse_dockerfile",
    "plan_build",
]
