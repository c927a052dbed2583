"""Errors of the viewer, each shown as a page with its HTTP status.

Errors::

    RllmError
    └── ViewerError                  a page cannot be shown (500)
        ├── NotFoundError(LookupError)   no such run or trajectory in the history (404)
        └── BadRequestError(ValueError)  a query parameter is bad; the message names it (400)
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["BadRequestError", "NotFoundError", "ViewerError"]


class ViewerError(RllmError):
    """A page cannot be shown; the message says why."""

    status = 500


class NotFoundError(ViewerError, LookupError):
    """The history has no such run or trajectory."""

    status = 404

    def __str__(self) -> str:  # LookupError would not quote, but keep it plain anyway
        return str(self.args[0]) if self.args else ""


class BadRequestError(ViewerError, ValueError):
    """A query parameter is bad; the message names it and the value."""

    status = 400
