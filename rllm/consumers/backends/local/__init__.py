"""The ``local`` backend: torch + transformers on one machine (CPU or one GPU)."""

from __future__ import annotations

from rllm.consumers.backends.local.backend import LOCAL_CAPABILITIES, LocalBackend
from rllm.consumers.backends.local.model import LoadedModel, load_model, tiny_model_dir

__all__ = ["LOCAL_CAPABILITIES", "LoadedModel", "LocalBackend", "load_model", "tiny_model_dir"]
