"""Errors of the gateway; each carries the HTTP status and reason the caller gets."""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["GatewayError"]


class GatewayError(RllmError):
    """A request the gateway refuses, with its HTTP status and a reason."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
