"""What a process that computes with a local model sets up once, the model server and the
local training backend alike: glibc keeps freed memory (``memory``), torch computes with a
fixed thread count or a tuner (``threads``), and the model loads from local files
(``loading``), all on the process's compute thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rllm.models.loading import LoadedModel, load_model
from rllm.models.memory import keep_freed_memory
from rllm.models.precision import warn_if_slow_bf16
from rllm.models.threads import FixedThreads, Threads, ThreadTuner, apply_threads, compute

__all__ = ["ModelRuntime", "start_runtime"]


@dataclass
class ModelRuntime:
    """A loaded model and what chooses the thread count its work runs with."""

    loaded: LoadedModel
    threads: ThreadTuner | FixedThreads
    """Times the steps to choose torch's thread count (fixed: left as set)."""


@compute
def start_runtime(
    model: str = "",
    gguf_file: str | None = None,
    device: str = "cpu",
    threads: Threads = 0,
    dtype: Literal["float32", "bfloat16"] = "float32",
    loaded: LoadedModel | None = None,
) -> ModelRuntime:
    """Tune the allocator and the threads, then load ``model`` (or take ``loaded``).

    Args:
        model: local HF directory or ``.gguf`` file; "" for SmolLM2-135M-Instruct.
        gguf_file: GGUF file name inside ``model``.
        device: torch device.
        threads: torch threads, a count (0: torch's default) or ``auto``.
        dtype: arithmetic the weights are cast to after loading in float32.
        loaded: a model loaded already (nothing else is loaded).

    Raises:
        ConfigError: the path does not exist or does not hold a model.
    """
    keep_freed_memory()
    tuner = apply_threads(threads)
    loaded = loaded or load_model(model, gguf_file, device)
    if dtype != "float32":
        import torch

        warn_if_slow_bf16(device, "the model (loaded in bfloat16)")
        loaded.model.to(getattr(torch, dtype))
    return ModelRuntime(loaded=loaded, threads=tuner)
