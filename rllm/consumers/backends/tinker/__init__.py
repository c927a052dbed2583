"""The ``tinker`` backend: LoRA training on the Tinker service over HTTP."""

from __future__ import annotations

from rllm.consumers.backends.tinker.backend import TINKER_CAPABILITIES, TinkerBackend
from rllm.consumers.backends.tinker.client import TinkerClient, TinkerError, to_datums

__all__ = ["TINKER_CAPABILITIES", "TinkerBackend", "TinkerClient", "TinkerError", "to_datums"]
