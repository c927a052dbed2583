"""What the local model server reads of its engine besides ``generate``, for the test doubles
that stand in for the engine (each adds its own tokenizer and ``generate``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["EngineDouble"]


class _Weights:
    """What the model server's ``/health`` reads of a model: its parameters' dtype."""

    class _Param:
        dtype = "torch.float32"

    def parameters(self) -> Iterator[Any]:
        yield self._Param()


class EngineDouble:
    """An engine's fixed facts: context length, vocabulary, policy version 0, fp32 weights."""

    max_model_len = 4096
    vocab_size = 1000
    version = 0
    policy_run = ""
    source = "test-double"
    model = _Weights()

    def threads_report(self) -> dict[str, int]:
        return {}
