"""``ViewerSettings``: where ``rllm-cli view`` listens and how often a live page refreshes;
env prefix ``RLLM_VIEW_``. The history it reads is ``HistorySettings``' (``RLLM_``)."""

from __future__ import annotations

import ipaddress

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.errors import ConfigError

__all__ = ["ViewerSettings", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ViewerSettings(BaseSettings):
    """The history viewer: a read-only web app over the history."""

    model_config = SettingsConfigDict(env_prefix="RLLM_VIEW_", frozen=True, extra="ignore")

    # --- listening ------------------------------------------------------------------
    host: str = "127.0.0.1"
    """Interface to listen on; a non-loopback one needs ``insecure``."""
    port: int = Field(default=8500, ge=0, le=65535)
    """Port to listen on."""
    insecure: bool = False
    """Allow a non-loopback ``host``: anyone who reaches it reads the whole history."""

    # --- pages ----------------------------------------------------------------------
    refresh_s: float = Field(default=3.0, gt=0, le=3600)
    """Seconds between two refreshes of a run that is still being written."""
    idle_refresh_s: float = Field(default=30.0, gt=0, le=3600)
    """Seconds between two refreshes of a run shown as finished or unfinished: a trainer's
    long update or the history sink's lag can leave a run without a new event for longer
    than ``live_window_s``, and the page notices when its events resume."""
    live_window_s: float = Field(default=60.0, gt=0)
    """A run whose last event is this recent is shown as running (a trainer between two
    batches has no session open); one with sessions open and nothing this recent as
    unfinished."""

    def check_host(self) -> None:
        """Refuse a non-loopback ``host`` unless ``insecure``.

        Raises:
            ConfigError: naming the host and what to do.
        """
        if not self.insecure and not is_loopback(self.host):
            raise ConfigError(
                f"view: host {self.host!r} is not a loopback address; the viewer has no "
                f"login, so anyone who reaches it reads the whole history. Use 127.0.0.1 "
                f"(an SSH tunnel from elsewhere), or pass --insecure to serve it anyway"
            )

    @property
    def base_url(self) -> str:
        """Where a browser on this machine opens it."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"
