"""Errors of the harness layer (below ``rllm.errors.RllmError``).

.. code-block:: text

    RllmError
    ├── ConfigError(ValueError)
    │   └── UnknownHarnessError          no harness has that name (the known ones listed)
    └── HarnessError(RuntimeError)       a harness could not be installed or started
"""

from __future__ import annotations

from rllm.errors import ConfigError, RllmError

__all__ = ["HarnessError", "UnknownHarnessError"]


class HarnessError(RllmError, RuntimeError):
    """A harness could not be installed or started; the message names the harness, the
    task and what failed."""


class UnknownHarnessError(ConfigError):
    """No harness is registered under the name asked for."""
