"""Errors of the trainer and its backends.

::

    RllmError
    └── TrainerError
        ├── CapabilityError(ConfigError)   a setting the chosen backend cannot honour
        ├── MissingTokensError(ValueError) a step without token IDs reached training
        └── CheckpointError(RuntimeError)  a checkpoint could not be written or read
"""

from __future__ import annotations

from rllm.errors import ConfigError, RllmError

__all__ = ["CapabilityError", "CheckpointError", "MissingTokensError", "TrainerError"]


class TrainerError(RllmError):
    """Root of the trainer's errors."""


class CapabilityError(TrainerError, ConfigError):
    """A setting the chosen backend cannot honour; raised before training starts."""


class MissingTokensError(TrainerError, ValueError):
    """An episode holds a step marked ``tokens=missing``: it cannot be trained on."""


class CheckpointError(TrainerError, RuntimeError):
    """A checkpoint could not be written or read."""
