"""Configuration of the stream processors (``rllm-cli process``), env prefix ``RLLM_``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.schemas.types import Estimator

__all__ = ["ProcessorSettings"]


class ProcessorSettings(BaseSettings):
    """How the assemble, score and group processors behave."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")

    # --- identity and topics ------------------------------------------------------------
    app_id: str = "rllm-processors"
    """faust application id: consumer group, changelog and internal topic names."""
    output_prefix: str = ""
    """Prefix of the output topics (trajectories, episodes, dead letters); replays use one."""
    replay: bool = False
    """Rebuild from the session log under a separate application id (state of its own)."""
    from_beginning: bool = True
    """A new consumer group starts at the earliest offset (else at the end of the log)."""

    # --- sessions ----------------------------------------------------------------------
    idle_timeout_s: float = Field(default=600.0, gt=0)
    """A session with no event for this long is closed with status ``timeout``."""
    reward_wait_s: float = Field(default=60.0, ge=0)
    """After SessionClosed, how long to wait for a RewardAssigned when the task names no
    reward function; then the trajectory goes out unscored with a ``reward_error``."""
    closed_retention_s: float = Field(default=3600.0, ge=0)
    """How long a finished session's event ids are kept to drop duplicates and report
    late events."""

    # --- scoring -----------------------------------------------------------------------
    reward_concurrency: int = Field(default=8, ge=1)
    """Reward functions running at once (threads); slow ones do not block a partition."""
    reward_timeout_s: float = Field(default=30.0, gt=0)
    """A reward function running longer is recorded as failed (``reward_error``)."""

    # --- groups ------------------------------------------------------------------------
    group_timeout_s: float = Field(default=1800.0, gt=0)
    """A group still short of its declared size this long after its first trajectory is
    emitted as a partial episode."""
    estimator: Estimator = Estimator.GRPO
    """Advantage estimator of runs whose tasks name none (``rllm.schemas.run``)."""
    advantage_eps: float = Field(default=1e-6, gt=0)
    """Epsilon added to the group std (GRPO)."""
    scale_by_std: bool = True
    """GRPO: divide by the group's unbiased std (verl's ``norm_adv_by_std_in_grpo``;
    Dr. GRPO sets this false)."""
    reinforce_baseline: float = 0.0
    """REINFORCE: constant baseline subtracted from the reward."""

    # --- worker ------------------------------------------------------------------------
    tick_interval_s: float = Field(default=1.0, gt=0)
    """How often timers look for idle sessions, late rewards and stale groups."""
    commit_interval_s: float = Field(default=0.5, gt=0)
    """How often consumed offsets are committed (at-least-once; outputs are idempotent)."""
    session_timeout_s: float = Field(default=10.0, ge=6)
    """Consumer group session timeout: how soon a killed worker's partitions move."""
    batch_max: int = Field(default=500, ge=1)
    """Records an agent handles as one batch: state is staged for the whole batch and
    its outputs' acks are awaited once."""
    batch_within_s: float = Field(default=0.02, gt=0)
    """How long an agent waits to fill a batch before handling what it has."""
    linger_s: float = Field(default=0.005, ge=0)
    """Producer linger: how long outputs wait to be batched into one request."""
    output_compression: Literal["zstd", "lz4", "snappy", "gzip", "none"] = "zstd"
    """Producer compression of trajectories, episodes and dead letters (zstd matches those
    topics' ``compression.type``, so the broker stores the batches as sent)."""
    internal_compression: Literal["zstd", "lz4", "snappy", "gzip", "none"] = "none"
    """Producer compression of the internal scoring topic (read back at once: compressing
    costs more CPU than it saves on a local broker)."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Stop the worker after this many seconds (None: run until stopped)."""
    log_level: str = "warning"
    """faust worker log level."""
