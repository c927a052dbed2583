"""The viewer's errors, re-exported for the modules that import them from here; they live
in ``rllm.consumers.viewer.errors`` (import them from there)."""

from __future__ import annotations

from rllm.consumers.viewer.errors import BadRequestError, NotFoundError, ViewerError

__all__ = ["BadRequestError", "NotFoundError", "ViewerError"]
