"""``GatewaySettings``: every knob of the model gateway (env ``RLLM_GATEWAY_*``)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from rllm.errors import ConfigError
from rllm.settings import default_home

__all__ = ["CaptureMode", "GatewaySettings", "SyncKind", "UpstreamKind", "WeightsKind"]


class UpstreamKind(StrEnum):
    """What serves the model behind the gateway."""

    VLLM = "vllm"
    """vLLM's OpenAI server (token IDs via ``return_token_ids``); any OpenAI-compatible server
    that returns token IDs the same way."""
    SGLANG = "sglang"
    """SGLang's native ``/generate`` (token-in, token-out) with the model's chat template."""
    HOSTED = "hosted"
    """A hosted API (OpenAI, Anthropic, ...): passed through, steps get token status missing."""


class SyncKind(StrEnum):
    """How the gateway gets a new policy served."""

    LOCAL = "local"
    """Our model server: it loads each checkpoint itself and reports it on ``/health``."""
    VLLM = "vllm"
    """vLLM: LoRA adapters loaded at runtime, full weights reloaded in dev mode."""
    SGLANG = "sglang"
    """SGLang: ``/update_weights_from_disk``, confirmed by ``/get_model_info``."""
    LOG = "log"
    """No server to tell (a hosted API): steps carry what the log names."""


class WeightsKind(StrEnum):
    """What a checkpoint holds."""

    AUTO = "auto"
    """A LoRA adapter when its folder holds ``adapter_config.json``, else full weights."""
    LORA = "lora"
    """A PEFT LoRA adapter."""
    FULL = "full"
    """A whole Hugging Face model folder."""


class CaptureMode(StrEnum):
    """When the agent gets its answer relative to Kafka's acknowledgement."""

    ACK = "ack"
    """Answer only after Kafka acknowledged the step (or it is safely spooled)."""
    ASYNC = "async"
    """Answer at once; publish in the background."""


class GatewaySettings(BaseSettings):
    """The model gateway's settings; a CLI flag and an env var set the same field."""

    model_config = SettingsConfigDict(env_prefix="RLLM_GATEWAY_", frozen=True, extra="ignore")

    # --- listening ------------------------------------------------------------------
    host: str = "127.0.0.1"
    """Interface to listen on."""
    port: int = Field(default=8400, ge=0, le=65535)
    """Port to listen on."""
    public_url: str | None = None
    """Base URL agents reach the gateway at (default http://host:port)."""

    # --- upstream -------------------------------------------------------------------
    upstream_url: str = "http://127.0.0.1:8000"
    """Base URL of the model server, without ``/v1`` (with ``upstream_urls``: the first);
    several, comma- or space-separated: the replicas (as ``upstream_urls``)."""
    upstream_urls: Annotated[tuple[str, ...], NoDecode] = ()
    """Several replicas of one model (``--upstream`` repeated; the env var a comma- or
    space-separated list): a session sticks to the replica of its first call (its prefix
    cache), a new session goes to the least loaded live one, and a replica that cannot be
    reached is taken out (its sessions move, each noting it in its next step) until its
    ``/health`` answers again. Empty: ``upstream_url`` alone."""
    replica_probe_s: float = Field(default=2.0, gt=0)
    """How often a replica taken out is asked ``/health`` to bring it back."""
    upstream_kind: UpstreamKind = UpstreamKind.VLLM
    """vllm, sglang or hosted."""
    upstream_api_key: SecretStr | None = None
    """Key sent to the upstream (hosted APIs); never logged, never captured."""
    upstream_timeout_s: float = Field(default=600.0, gt=0)
    """How long one upstream call may take before the agent gets a 504."""
    upstream_streams: bool = True
    """Streamed calls are streamed upstream and translated chunk by chunk (vLLM, SGLang);
    off for a model server that only answers whole (the local model server): its answer is
    then sent as a stream once it is complete."""
    tokenizer: str | None = None
    """Tokenizer (HF name or path) for the sglang chat template, loaded when the gateway
    starts (a start fails naming it when it cannot be loaded)."""

    # --- capture --------------------------------------------------------------------
    capture: CaptureMode = CaptureMode.ACK
    """ack: answer after Kafka's ack; async: answer at once."""
    ack_timeout_s: float = Field(default=10.0, gt=0)
    """How long a produce may wait for Kafka before the event goes to the spool."""
    linger_ms: float = Field(default=0.0, ge=0)
    """Producer linger (librdkafka ``linger.ms``): 0 sends each step at once (ack latency)."""
    publish_delay_ms: float = Field(default=3.0, ge=0, le=1000)
    """capture=async: how long after its answer a step is built and handed to Kafka, so
    that the client reads its answer before the gateway, librdkafka and a broker on the same
    machine spend CPU on the event (measured: 0.4 ms of added p50 on two cores); steps keep
    their order, and a session's close, its info, an ack-waiting step and a shutdown first
    publish what waits. 0: right after the answer."""
    spool_dir: Path = Field(default_factory=lambda: default_home() / "gateway-spool")
    """Where events wait while Kafka is unreachable (append-only file)."""
    spool_fsync: bool = True
    """fsync every spooled event (durable across a machine crash)."""
    drain_interval_s: float = Field(default=1.0, gt=0)
    """How often the spool retries Kafka."""
    producer_name: str = "gateway"
    """``producer`` field of published events."""

    # --- sessions -------------------------------------------------------------------
    implicit_sessions: bool = True
    """A call to an unknown session id opens it (run id from ``x-rllm-run-id``)."""
    default_run_id: str = "default"
    """Run id of implicitly opened sessions without an ``x-rllm-run-id`` header."""
    idle_timeout_s: float = Field(default=3600.0, ge=0)
    """Close a session without calls for this long with status timeout (0: never); a
    session serving a call is never idle, and a call whose client disconnected is cancelled
    upstream at once, so an abandoned session closes one timeout after its last call."""

    # --- security -------------------------------------------------------------------
    admin_key: SecretStr | None = None
    """Admin key (open sessions, policy, pause, events, implicit sessions). The gateway
    refuses to start without one unless ``insecure`` is set; ``rllm-cli gateway`` and
    ``rllm-cli up`` use the key stored 0600 in ``$RLLM_HOME/gateway/admin-key`` (generated
    on first start) when none is given."""
    insecure: bool = False
    """Run without an admin key: anyone may open, use, read and close any session, and an
    unknown session id opens a session (the old default; logged as a warning at start)."""
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """Largest request body accepted (413 above). A call whose captured step would be over
    the event limit (``RLLM_MAX_MESSAGE_BYTES``) is still served; its step is published as a
    failed step (error kind ``too_large``) without the payloads."""
    body_timeout_s: float = Field(default=2.0, gt=0)
    """Longest pause while a request body arrives (a body shorter than its Content-Length,
    a stalled client) before the request is answered 408."""

    # --- weights --------------------------------------------------------------------
    policy_version: int = Field(default=0, ge=0)
    """Policy version at start."""
    follow_policy_updates: bool = True
    """Consume ``rllm.policy-updates`` and take each new version once the upstream serves it."""
    policy_sync: SyncKind | None = None
    """How a new version gets served: local (our model server loads it itself and reports
    it), vllm (LoRA adapter loaded at runtime, or full weights reloaded in dev mode), sglang
    (``/update_weights_from_disk``), log (a hosted API: the version the log names). Unset:
    sglang or log by the upstream kind; for a vllm upstream, local when it reports a policy
    on ``/health``, else vllm."""
    policy_weights: WeightsKind = WeightsKind.AUTO
    """What a checkpoint holds: lora, full, or auto (lora when its folder has
    ``adapter_config.json``)."""
    upstream_checkpoint_dir: str | None = None
    """The trainer's checkpoint root as the upstream sees it: the server loads
    ``<this>/<run_id>/v<version>``. Unset: the path the trainer wrote."""
    pause_retry_after_s: int = Field(default=5, ge=1)
    """Retry-After of the 429 answered while paused."""

    @field_validator("admin_key")
    @classmethod
    def _check_admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ConfigError(
                "the admin key is empty; give a non-empty --admin-key / RLLM_GATEWAY_ADMIN_KEY "
                "or leave it unset to use $RLLM_HOME/gateway/admin-key"
            )
        return value

    @field_validator("upstream_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _base_url(value)

    @model_validator(mode="before")
    @classmethod
    def _listed_replicas(cls, data: Any) -> Any:
        """An ``upstream_url`` that lists several servers (comma- or space-separated)
        names the replicas, unless ``upstream_urls`` does."""
        url = data.get("upstream_url") if isinstance(data, dict) else None
        if isinstance(url, str) and len(parts := url.replace(",", " ").split()) > 1:
            data = {**data, "upstream_url": parts[0]}
            data.setdefault("upstream_urls", tuple(parts))
        return data

    @field_validator("upstream_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part for part in value.replace(",", " ").split() if part)
        return value

    @field_validator("upstream_urls")
    @classmethod
    def _check_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        urls = tuple(_base_url(url) for url in value)
        twice = sorted({url for url in urls if urls.count(url) > 1})
        if twice:
            raise ConfigError(
                f"upstream replica {twice[0]!r} is named twice; name each replica once"
            )
        return urls

    @model_validator(mode="after")
    def _first_replica(self) -> GatewaySettings:
        if self.upstream_urls and self.upstream_url != self.upstream_urls[0]:
            object.__setattr__(self, "upstream_url", self.upstream_urls[0])  # frozen model
        return self

    @property
    def replicas(self) -> tuple[str, ...]:
        """Every upstream replica's base URL (``upstream_url`` alone when one)."""
        return self.upstream_urls or (self.upstream_url,)

    @property
    def base_url(self) -> str:
        """Where agents reach the gateway."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")


def _base_url(value: str) -> str:
    """An upstream's base URL without a trailing ``/`` or ``/v1``.

    Raises:
        ConfigError: it is not an http(s) URL.
    """
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"upstream URL {value!r} must start with http:// or https://")
    value = value.rstrip("/")
    return value[:-3] if value.endswith("/v1") else value
