"""The ``rllm-cli`` entry point: one group, each command in its own module."""

from __future__ import annotations

import click

from rllm.cli.analytics import analytics
from rllm.cli.bench import bench
from rllm.cli.checkpoints import checkpoints
from rllm.cli.demo import demo
from rllm.cli.eval import eval_command
from rllm.cli.events import events
from rllm.cli.gateway import gateway
from rllm.cli.harness import harness
from rllm.cli.history import history
from rllm.cli.model import model
from rllm.cli.process import process
from rllm.cli.replay import replay
from rllm.cli.sandbox import sandbox
from rllm.cli.serve import serve
from rllm.cli.stack import down, status, topics, up
from rllm.cli.train import train
from rllm.cli.view import view

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rllm-stream")
def cli() -> None:
    """rllm-stream: train language agents with RL, as an event stream on Kafka."""
    from rllm.settings import private_home

    private_home()  # $RLLM_HOME (~/.rllm): 0700, whatever made it first


cli.add_command(up)
cli.add_command(bench)
cli.add_command(model)
cli.add_command(down)
cli.add_command(status)
cli.add_command(events)
cli.add_command(eval_command)
cli.add_command(topics)
cli.add_command(history)
cli.add_command(analytics)
cli.add_command(replay)
cli.add_command(gateway)
cli.add_command(process)
cli.add_command(train)
cli.add_command(serve)
cli.add_command(sandbox)
cli.add_command(harness)
cli.add_command(checkpoints)
cli.add_command(view)
cli.add_command(demo)


def main() -> None:
    """Console script entry."""
    cli()
