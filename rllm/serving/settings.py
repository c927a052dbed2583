"""``ServeSettings``: the local model server (``rllm-cli serve``), env prefix ``RLLM_``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.models.threads import Threads, check_threads

__all__ = ["ServeSettings"]


class ServeSettings(BaseSettings):
    """The local OpenAI-compatible model server."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")

    # --- model ----------------------------------------------------------------------
    model: str = ""
    """Local HF model directory or .gguf file; '' = SmolLM2-135M-Instruct."""
    gguf_file: str | None = None
    """GGUF file name inside ``model``."""
    served_model_name: str = "local"
    """Name reported by /v1/models and in responses."""
    device: str = "cpu"
    """torch device."""
    serve_dtype: Literal["float32", "bfloat16"] = "float32"
    """Arithmetic of generation. ``bfloat16`` is several times faster on AMX CPUs and
    GPUs, as vLLM serves; its logprobs differ from a float32 trainer's in the second or
    third digit (train with ``RLLM_PRECISION=bf16`` to match)."""
    torch_threads: Threads = 0
    """torch CPU threads: a count (0: torch's default), or ``auto``, which times the
    decode steps and keeps the faster of 1 and all cores (``up`` sets ``auto``)."""

    @field_validator("torch_threads")
    @classmethod
    def _threads(cls, v: Threads) -> Threads:
        return check_threads(v)

    # --- http -----------------------------------------------------------------------
    serve_host: str = "127.0.0.1"
    """Address to listen on."""
    serve_port: int = Field(default=8001, ge=0, le=65535)
    """Port to listen on."""

    # --- batching -------------------------------------------------------------------
    max_batch: int = Field(default=32, ge=1)
    """Most sequences generated together."""
    batch_wait_ms: float = Field(default=10.0, ge=0)
    """How long the first request of a batch waits for others to join."""

    # --- policy updates -------------------------------------------------------------
    follow_updates: bool = True
    """Reload weights when PolicyUpdated arrives on rllm.policy-updates."""
    follow_run_id: str | None = None
    """Only follow updates of this training run (None: any)."""
