"""The ``fireworks`` backend: LoRA SFT jobs and LoRA loads on Fireworks, through its SDK."""

from __future__ import annotations

from rllm.consumers.backends.fireworks.backend import FIREWORKS_CAPABILITIES, FireworksBackend
from rllm.consumers.trainer.errors import FireworksError

__all__ = ["FIREWORKS_CAPABILITIES", "FireworksBackend", "FireworksError"]
