"""``HistorySettings``: where history is kept and how the sink batches; env prefix ``RLLM_``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.consumers.history.limits import ReadLimits
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

    # --- read limits of a user's statement (analytics sql, the viewer) ----------------
    history_sql_max_execution_s: int = Field(default=ReadLimits.max_execution_s, ge=1)
    """Wall-clock seconds one statement may run (ClickHouse ``max_execution_time``)."""
    history_sql_max_rows_to_read: int = Field(default=ReadLimits.max_rows_to_read, ge=1)
    """Rows one statement may read (``max_rows_to_read``)."""
    history_sql_max_memory_bytes: int = Field(default=ReadLimits.max_memory_bytes, ge=1 << 20)
    """Memory one statement may use (``max_memory_usage``)."""
    history_sql_max_result_rows: int = Field(default=ReadLimits.max_result_rows, ge=1)
    """Rows one statement may return (``max_result_rows``)."""
    history_sql_max_result_bytes: int = Field(default=ReadLimits.max_result_bytes, ge=1)
    """Bytes one statement may return, uncompressed (``max_result_bytes``)."""

    # --- service --------------------------------------------------------------------
    history_socket: Path | None = None
    """Unix socket of the history service's query API (default: <history_dir>.sock)."""

    @property
    def read_limits(self) -> ReadLimits:
        """The limits a user's statement runs under (with ``readonly=1``)."""
        return ReadLimits(
            max_execution_s=self.history_sql_max_execution_s,
            max_rows_to_read=self.history_sql_max_rows_to_read,
            max_memory_bytes=self.history_sql_max_memory_bytes,
            max_result_rows=self.history_sql_max_result_rows,
            max_result_bytes=self.history_sql_max_result_bytes,
        )

    @property
    def socket_path(self) -> Path:
        """The service socket."""
        return self.history_socket or self.history_dir.with_name(self.history_dir.name + ".sock")
