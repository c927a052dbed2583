"""The ``fireworks`` backend: LoRA SFT jobs and hot-loading on Fireworks."""

from __future__ import annotations

from rllm.consumers.backends.fireworks.backend import FIREWORKS_CAPABILITIES, FireworksBackend
from rllm.consumers.backends.fireworks.client import FireworksClient, FireworksError

__all__ = ["FIREWORKS_CAPABILITIES", "FireworksBackend", "FireworksClient", "FireworksError"]
