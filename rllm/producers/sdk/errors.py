"""Errors of the SDK's gateway client.

::

    RllmError
    └── GatewayRequestError(ConnectionError)   the gateway refused or could not be reached
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["GatewayRequestError"]


class GatewayRequestError(RllmError, ConnectionError):
    """The gateway refused or could not be reached."""
