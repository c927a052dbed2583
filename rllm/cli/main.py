"""The ``rllm-cli`` entry point: one group, each command in its own module."""

from __future__ import annotations

import click

from rllm.cli.events import events
from rllm.cli.stack import down, status, topics, up

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rllm-stream")
def cli() -> None:
    """rllm-stream: train language agents with RL, as an event stream on Kafka."""


cli.add_command(up)
cli.add_command(down)
cli.add_command(status)
cli.add_command(events)
cli.add_command(topics)


def main() -> None:
    """Console script entry."""
    cli()
