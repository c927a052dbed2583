"""The ``tinker`` backend: LoRA training on the Tinker service through its SDK."""

from __future__ import annotations

from rllm.consumers.backends.tinker.backend import TINKER_CAPABILITIES, TinkerBackend
from rllm.consumers.backends.tinker.datums import to_datums
from rllm.consumers.trainer.errors import TinkerError

__all__ = ["TINKER_CAPABILITIES", "TinkerBackend", "TinkerError", "to_datums"]
