"""The ``verl`` backend: DataProto conversion and config (runs on GPUs)."""

from __future__ import annotations

from rllm.consumers.backends.verl.backend import VERL_CAPABILITIES, VerlBackend
from rllm.consumers.backends.verl.convert import VerlBatch, to_verl_batch, verl_config

__all__ = ["VERL_CAPABILITIES", "VerlBackend", "VerlBatch", "to_verl_batch", "verl_config"]
