"""``rllm-cli process``: run the stream processors (assemble, score, group)."""

from __future__ import annotations

from typing import Any

import click

from rllm.cli.common import kafka_options, kafka_settings, reports_errors
from rllm.schemas.types import Estimator

__all__ = ["process"]


@click.command()
@kafka_options
@click.option(
    "--replay", is_flag=True, default=None, help="Rebuild from the session log with fresh state."
)
@click.option(
    "--from-beginning/--from-end",
    default=None,
    help="Where a new consumer group starts [default: beginning].",
)
@click.option(
    "--output-prefix",
    default=None,
    help="Prefix of the output topics, e.g. 'replay1.' (RLLM_OUTPUT_PREFIX).",
)
@click.option(
    "--timeout", "timeout_s", type=float, default=None, help="Stop after this many seconds."
)
@click.option(
    "--idle-exit",
    "idle_exit_s",
    type=float,
    default=None,
    help="Stop once no record arrived for this many seconds (default for --replay: 10).",
)
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    type=float,
    default=None,
    help="Close sessions idle this long with status timeout (RLLM_IDLE_TIMEOUT_S).",
)
@click.option(
    "--reward-wait",
    "reward_wait_s",
    type=float,
    default=None,
    help="Wait this long after SessionClosed for a RewardAssigned when the task "
    "has no reward_fn (RLLM_REWARD_WAIT_S).",
)
@click.option(
    "--group-timeout",
    "group_timeout_s",
    type=float,
    default=None,
    help="Emit a partial episode after this long (RLLM_GROUP_TIMEOUT_S).",
)
@click.option(
    "--estimator",
    default=None,
    help=f"Default advantage estimator of runs that name none: {', '.join(Estimator)} "
    "(RLLM_ESTIMATOR).",
)
@click.option("--log-level", default=None, help="faust log level [default: warning].")
@reports_errors
def process(
    bootstrap_servers: str | None, topic_prefix: str | None, idle_exit_s: float | None, **flags: Any
) -> None:
    """Assemble trajectories, attach rewards and group episodes, from rllm.session-events."""
    from rllm.processors import ProcessorSettings, run_processors

    overrides = {k: v for k, v in flags.items() if v is not None}
    settings = ProcessorSettings(**overrides)
    if settings.replay and idle_exit_s is None:
        idle_exit_s = 10.0
    run_processors(settings, kafka_settings(bootstrap_servers, topic_prefix), idle_exit_s)
