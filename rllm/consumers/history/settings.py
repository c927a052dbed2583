"""``HistorySettings``: where history is kept and how the sink batches; env prefix ``RLLM_``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.settings import default_home

__all__ = ["HistorySettings"]


class HistorySettings(BaseSettings):
    """The history service: engine, sink batching, the local query API."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")

    # --- engine ---------------------------------------------------------------------
    clickhouse_url: str | None = None
    """ClickHouse server URL (http://host:8123); unset means embedded chDB."""
    clickhouse_user: str = "default"
    """User for the ClickHouse server."""
    clickhouse_password: SecretStr | None = None
    """Password for the ClickHouse server; never logged."""
    history_dir: Path = Field(default_factory=lambda: default_home() / "history")
    """chDB database directory (held by one process at a time)."""
    history_database: str = Field(default="rllm", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Database holding the history tables."""

    # --- sink -----------------------------------------------------------------------
    history_group_id: str = "rllm-history"
    """Kafka consumer group of the sink."""
    history_batch_rows: int = Field(default=20_000, ge=1)
    """Insert once this many events are buffered."""
    history_batch_s: float = Field(default=1.0, gt=0)
    """Insert at least this often while events arrive (seconds)."""

    # --- service --------------------------------------------------------------------
    history_socket: Path | None = None
    """Unix socket of the history service's query API (default: <history_dir>.sock)."""

    @property
    def socket_path(self) -> Path:
        """The service socket."""
        return self.history_socket or self.history_dir.with_name(self.history_dir.name + ".sock")
