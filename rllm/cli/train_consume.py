"""``rllm-cli train consume``: the trainer consumer alone, on ``rllm.episodes`` (the stack's
``trainer`` service runs it)."""

from __future__ import annotations

from typing import Any

import click

from rllm.cli.common import console, kafka_options, kafka_settings, reports_errors
from rllm.cli.groups import GroupedCommand
from rllm.cli.train_options import DISTILL, OBJECTIVE, RUN, options, preflight, rl_option_groups

__all__ = ["consume"]

EPISODES = ("mode", "max_staleness", "uniform_reward", "idle_exit_s")
"""Which episodes are trained, and when the consumer stops waiting for more."""
OPTION_GROUPS = rl_option_groups(EPISODES)
"""How ``rllm-cli train consume --help`` groups its options."""


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
@options(*RUN, *OBJECTIVE, *EPISODES, *DISTILL)
@kafka_options
@reports_errors
def consume(bootstrap_servers: str | None, topic_prefix: str | None, **flags: Any) -> None:
    """Consume episodes, update the policy, publish PolicyUpdated, checkpoint (the episodes
    come from rollouts someone else drives: rllm-cli eval, the SDK, a harness)."""
    from rllm.app import describe_drops
    from rllm.consumers.backends import backend_capabilities
    from rllm.consumers.trainer.loop import run_trainer
    from rllm.consumers.trainer.settings import TrainerSettings
    from rllm.consumers.trainer.types import check_capabilities
    from rllm.errors import RllmError

    kafka = kafka_settings(bootstrap_servers, topic_prefix)
    settings = TrainerSettings(**{k: v for k, v in flags.items() if v is not None})
    check_capabilities(settings, settings.backend.value, backend_capabilities(settings.backend))
    preflight(kafka, None)
    report = run_trainer(settings, kafka)
    console.print(
        f"trained {report.updates} update(s); policy version {report.version}; "
        f"episodes consumed {report.episodes_consumed}; {describe_drops(report.drops)}"
    )
    failure = report.all_refused()
    if failure is not None:
        raise RllmError(f"trainer run {settings.run_id}: {failure}")
