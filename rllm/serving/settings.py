"""``ServeSettings``: the local model server (``rllm-cli serve``), env prefix ``RLLM_``;
the fields the trainer has too read ``RLLM_SERVE_*`` (one variable, one field)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rllm.models.threads import ThreadsSetting
from rllm.settings import MovedEnv, OwnEnvSettings, model_env

__all__ = ["ServeSettings"]


class ServeSettings(OwnEnvSettings):
    """The local OpenAI-compatible model server."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")
    owner: ClassVar[str] = "the model server"
    moved_env: ClassVar[tuple[MovedEnv, ...]] = model_env("SERVE")

    # --- model ----------------------------------------------------------------------
    model: str = ""
    """Local HF model directory or .gguf file (``RLLM_SERVE_MODEL``); '' =
    SmolLM2-135M-Instruct."""
    gguf_file: str | None = None
    """GGUF file name inside ``model`` (``RLLM_SERVE_GGUF_FILE``)."""
    served_model_name: str = "local"
    """Name reported by /v1/models and in responses."""
    device: str = "cpu"
    """torch device (``RLLM_SERVE_DEVICE``)."""
    serve_dtype: Literal["float32", "bfloat16"] = "float32"
    """Arithmetic of generation. ``bfloat16`` is several times faster on AMX CPUs and
    GPUs, as vLLM serves; its logprobs differ from a float32 trainer's in the second or
    third digit (train with ``RLLM_PRECISION=bf16`` to match)."""
    torch_threads: ThreadsSetting = 0
    """torch CPU threads (``RLLM_SERVE_TORCH_THREADS``): a count (0: torch's default), or
    ``auto``, which times the decode steps and keeps the faster of 1 and all cores (``up``
    sets ``auto``)."""
    # --- http -----------------------------------------------------------------------
    serve_host: str = "127.0.0.1"
    """Address to listen on."""
    serve_port: int = Field(default=8000, ge=0, le=65535)
    """Port to listen on: the gateway's default upstream, where ``up`` starts it too."""

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
