"""Errors of the gateway; each carries the HTTP status and reason the caller gets.

::

    RllmError
    ├── GatewayError        a request the gateway refuses (status, reason)
    ├── UnreadableRequestError     a body it cannot read or translate (also a ValueError)
    └── UpstreamFailure     the upstream failed (status and body passed to the agent)
"""

from __future__ import annotations

from typing import Any

from rllm.errors import RllmError
from rllm.schemas.types import StepError

__all__ = ["GatewayError", "UnreadableRequestError", "UpstreamFailure", "anthropic_error"]


class GatewayError(RllmError):
    """A request the gateway refuses, with its HTTP status and a reason.

    Args:
        status: the HTTP status answered.
        message: the reason, naming the bad value and what to do.
        retry_after: seconds for a ``Retry-After`` header.
        close: close the connection after answering (the body was not read to its end).
    """

    def __init__(
        self, status: int, message: str, retry_after: int | None = None, close: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.close = close


class UnreadableRequestError(RllmError, ValueError):
    """A request body the gateway cannot read or translate (not JSON, an unsupported
    content part or tool choice); answered 400 with its message. A ``ValueError`` too, so
    the callers that catch that keep catching it."""


class UpstreamFailure(RllmError):
    """The upstream failed; ``status``/``body`` go to the agent, ``error`` into the step."""

    def __init__(
        self,
        kind: str,
        status: int,
        body: bytes,
        message: str,
        content_type: str = "application/json",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.content_type = content_type
        self.error = StepError(kind=kind, message=message[:2000], status_code=status)


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An error body in the Anthropic Messages shape, for ``status``."""
    default = "invalid_request_error" if status < 500 else "api_error"
    kind = _ANTHROPIC_TYPES.get(status, default)
    return {"type": "error", "error": {"type": kind, "message": message}}
