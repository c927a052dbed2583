"""Errors of policy sync: a model server that will not load a policy.

::

    RllmError
    └── PolicyLoadRefused    the server refused or failed a load (the reason, as it said)
"""

from __future__ import annotations

from rllm.errors import RllmError

__all__ = ["PolicyLoadRefused"]


class PolicyLoadRefused(RllmError):
    """The model server refused or failed to load a policy; the gateway keeps stamping the
    version it served before, and says why on ``/admin/policy`` (``sync_error``)."""
