"""Settings of the sandbox backends (env ``RLLM_SANDBOX_``): which backend, where images,
snapshots and live sandboxes are kept, and each hosted backend's credentials."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.settings import default_home

__all__ = ["SandboxSettings"]


class SandboxSettings(BaseSettings):
    """One class for every backend; a backend reads only its own section."""

    model_config = SettingsConfigDict(env_prefix="RLLM_SANDBOX_", frozen=True, extra="ignore")

    # --- every backend ----------------------------------------------------------------
    backend: str = "local"
    """Default backend: ``local``, ``docker``, ``daytona`` or ``modal``."""
    home: Path = Field(default_factory=lambda: default_home() / "sandboxes")
    """Images, snapshots and live sandboxes' state (``$RLLM_HOME/sandboxes``)."""
    snapshot_ttl_s: float | None = Field(default=7 * 24 * 3600.0, gt=0)
    """How long a snapshot stays valid; None keeps it until deleted."""
    build_ca_bundle: Path | None = None
    """A CA bundle that the RUN steps of local image builds trust for HTTPS (a network
    whose egress re-signs TLS, as on these machines); bound read-only at build time and
    named by SSL_CERT_FILE, PIP_CERT, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
    NODE_EXTRA_CA_CERTS and GIT_SSL_CAINFO, never written into a layer."""

    # --- local ------------------------------------------------------------------------
    id_base: int = Field(default=100_000, ge=1, le=2**32 - 1 - 65536)
    """First host uid and gid of local sandboxes: ids 0..65535 inside are host ids
    ``id_base``..``id_base+65535`` (as rootless containers and Docker's userns-remap);
    never 0, so root inside owns nothing of the host."""

    # --- docker -----------------------------------------------------------------------
    docker_url: str | None = None
    """Docker Engine API address (``unix:///var/run/docker.sock``); None: ``DOCKER_HOST``
    or the default socket."""

    # --- daytona ----------------------------------------------------------------------
    daytona_api_key: SecretStr | None = None
    """Daytona API key (``DAYTONA_API_KEY`` works too); never logged."""
    daytona_api_url: str | None = None
    """Daytona API URL; None is Daytona's own default."""
    daytona_target: str | None = None
    """Daytona target region."""

    # --- modal ------------------------------------------------------------------------
    modal_token_id: SecretStr | None = None
    """Modal token id (``MODAL_TOKEN_ID`` works too)."""
    modal_token_secret: SecretStr | None = None
    """Modal token secret (``MODAL_TOKEN_SECRET`` works too); never logged."""
    modal_app: str = "rllm-sandboxes"
    """Modal app the sandboxes are created under."""

    @property
    def images_dir(self) -> Path:
        """The local image store."""
        return self.home / "images"

    @property
    def run_dir(self) -> Path:
        """Live local sandboxes (one directory each, with its state file)."""
        return self.home / "run"

    @property
    def snapshots_file(self) -> Path:
        """The snapshot registry of every backend."""
        return self.home / "snapshots.json"
