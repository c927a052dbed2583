"""Errors of the local model server.

::

    RllmError
    └── ServingError                  the model server cannot serve
        └── RequestError(ValueError)  a request it refuses (HTTP 400, this message)
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["RequestError", "ServingError"]


class ServingError(RllmError):
    """The local model server cannot do what was asked."""


class RequestError(ServingError, ValueError):
    """A request the server cannot serve; answered with HTTP 400 and this message."""
