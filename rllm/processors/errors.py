"""Errors of the stream processors.

::

    RllmError
    └── ProcessorError
        └── AssemblyError(ValueError)   a session's events cannot form a trajectory
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["AssemblyError", "ProcessorError"]


class ProcessorError(RllmError):
    """Something in the stream processors failed."""


class AssemblyError(ProcessorError, ValueError):
    """A session's events cannot be assembled into a trajectory (the reason says why)."""
