"""Errors of the model runtime and the user's model profiles.

::

    RllmError
    ├── ConfigError(ValueError)
    │   └── ModelConfigError        the model configuration is missing, unreadable, or
    │                               names an unknown profile
    └── InfraError(RuntimeError)
        └── LocalModelError         the default local model could not be installed or cached
"""

from __future__ import annotations

from rllm.errors import ConfigError, InfraError

__all__ = ["LocalModelError", "ModelConfigError"]


class ModelConfigError(ConfigError):
    """The model configuration is missing, unreadable, or names an unknown profile."""


class LocalModelError(InfraError):
    """The default local model could not be installed or cached."""
