"""The ``local`` backend: torch + transformers on one machine (CPU or one GPU); the model
loads through ``rllm.models``."""

from __future__ import annotations

from rllm.consumers.backends.local.backend import LOCAL_CAPABILITIES, LocalBackend

__all__ = ["LOCAL_CAPABILITIES", "LocalBackend"]
