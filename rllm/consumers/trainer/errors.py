"""Errors of the trainer and its backends.

::

    RllmError
    └── TrainerError
        ├── CapabilityError(ConfigError)   a setting the chosen backend cannot honour
        ├── MissingTokensError(ValueError) a step without token IDs reached training
        ├── UnreproducibleSamplingError(ValueError)  a step sampled as the backend cannot score
        ├── CheckpointError(RuntimeError)  a checkpoint could not be written or read
        ├── SftDataError(ValueError)       an SFT dataset file or row that cannot be trained on
        ├── FireworksError                 the Fireworks API refused a request or a job failed
        ├── TinkerError                    the Tinker service refused a request or a future failed
        └── TeacherError(RuntimeError)     the served distillation teacher could not be used
            ├── TeacherUnavailableError             unreachable, or 5xx/429 after retries
            └── TeacherResponseError(ValueError)    an answer refused or unusable
                └── TeacherTokenMismatchError       another token/tokenizer than the student's
"""

from __future__ import annotations

from rllm.errors import ConfigError, RllmError

__all__ = [
    "CapabilityError",
    "CheckpointError",
    "FireworksError",
    "MissingTokensError",
    "SftDataError",
    "TeacherError",
    "TeacherResponseError",
    "TeacherTokenMismatchError",
    "TeacherUnavailableError",
    "TinkerError",
    "TrainerError",
    "UnreproducibleSamplingError",
]


class TrainerError(RllmError):
    """Root of the trainer's errors."""


class CapabilityError(TrainerError, ConfigError):
    """A setting the chosen backend cannot honour; raised before training starts."""


class MissingTokensError(TrainerError, ValueError):
    """An episode holds a step marked ``tokens=missing``: it cannot be trained on."""


class UnreproducibleSamplingError(TrainerError, ValueError):
    """A step was sampled in a way the backend cannot score (``min_p``, penalties, or a
    temperature / top-p / top-k it does not apply): its importance ratio would be wrong."""


class CheckpointError(TrainerError, RuntimeError):
    """A checkpoint could not be written or read."""


class TeacherError(TrainerError, RuntimeError):
    """The served teacher could not be used."""


class TeacherUnavailableError(TeacherError):
    """The teacher was unreachable, or answered 5xx/429, after every retry."""


class TeacherResponseError(TeacherError, ValueError):
    """The teacher refused a request (4xx) or answered something unusable."""


class TeacherTokenMismatchError(TeacherResponseError):
    """The teacher scored other tokens than asked, or tokenizes unlike the student."""


class SftDataError(TrainerError, ValueError):
    """A dataset file or row that cannot be trained on; names the file, row and field."""


class FireworksError(TrainerError):
    """The Fireworks API refused a request or a job failed."""


class TinkerError(TrainerError):
    """The Tinker service refused a request or a future failed."""
