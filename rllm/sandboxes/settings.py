"""Settings of the sandbox backends (env ``RLLM_SANDBOX_``): which backend, where images,
snapshots and live sandboxes are kept, and each hosted backend's credentials."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.settings import default_home

__all__ = ["PullPolicy", "SandboxSettings"]


class PullPolicy(StrEnum):
    """When an image is pulled from its registry (Docker's ``--pull``)."""

    MISSING = "missing"
    """Only when no store has it."""
    NEVER = "never"
    """Never: the store's images and the offline base images only."""
    ALWAYS = "always"
    """Every time a sandbox or a build asks for it (layers already here are reused)."""


class SandboxSettings(BaseSettings):
    """One class for every backend; a backend reads only its own section."""

    model_config = SettingsConfigDict(
        env_prefix="RLLM_SANDBOX_", frozen=True, extra="ignore", populate_by_name=True
    )

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

    # --- images from registries (local and docker) ------------------------------------
    pull_policy: PullPolicy = PullPolicy.MISSING
    """When images are pulled: ``missing`` (default), ``never``, ``always``."""
    registry_mirror: str | None = Field(
        default=None,
        validation_alias=AliasChoices("RLLM_SANDBOX_REGISTRY_MIRROR", "RLLM_REGISTRY_MIRROR"),
    )
    """A registry that Docker Hub names are pulled through (dockerd's
    ``registry-mirrors``): ``host[:port]`` or ``http(s)://host[:port]``; ``http://`` and
    loopback hosts are spoken to without TLS. Docker Hub is tried when it fails."""
    insecure_registries: list[str] = Field(default_factory=list)
    """Registries (``host[:port]``) reached over plain HTTP or unverified TLS, as
    dockerd's ``insecure-registries``; loopback ones are always."""
    registry_auth_file: Path | None = None
    """Credentials file (``~/.docker/config.json`` format); None: skopeo's lookup
    (``$REGISTRY_AUTH_FILE``, containers' ``auth.json``, then ``~/.docker/config.json``)."""
    registry_username: str | None = None
    """User for every registry pulled from (with ``registry_password``)."""
    registry_password: SecretStr | None = None
    """Password or token of ``registry_username``; never logged, never on a command line."""
    image_substitutes: dict[str, str] = Field(default_factory=dict)
    """Images to use instead of others (``{"ubuntu:24.04": "debian:trixie"}``), applied
    only when named here or by ``--image-substitute``; each use logs a WARNING and
    labels the image ``rllm.substituted-from``."""

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
