"""``rllm-cli demo``: the stack up, ``multiply``'s held-out tasks evaluated, RL through the
whole pipeline, the same tasks evaluated again, before / after side by side, the stack down
whatever happens (``rllm.app.demo`` does the work). With ``--agent bash``: generated shell
tasks through the harness in sandboxes instead (``make demo-agent``)."""

from __future__ import annotations

from pathlib import Path

import click

from rllm.cli.common import console, reports_errors

__all__ = ["demo"]


@click.command()
@click.option(
    "--max-updates",
    type=click.IntRange(1),
    default=None,
    help="Policy updates made at most (a batch without one does not count) [120].",
)
@click.option(
    "--max-minutes",
    type=click.FloatRange(0),
    default=None,
    help="Start no new batch after this many minutes of training [6; 15 with --agent].",
)
@click.option(
    "--target-reward",
    type=click.FloatRange(0, 1),
    default=None,
    help="Stop once the last 5 batches' mean training reward reaches it [0.95; 0: never].",
)
@click.option(
    "--held-out", type=click.IntRange(1, 20), default=None, help="Held-out tasks to evaluate [20]."
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The reward curve PNG [$RLLM_HOME/demo/reward-curve.png].",
)
@click.option(
    "--agent",
    default=None,
    help="Learn generated shell tasks (rllm-cli bench gen shell-basics) through this "
    "harness (bash) in local sandboxes instead of multiply with the chat agent.",
)
@click.option(
    "--keep-stack",
    is_flag=True,
    help="Use the running stack (or start it) and leave it running afterwards.",
)
@reports_errors
def demo(
    max_updates: int | None,
    max_minutes: float | None,
    target_reward: float | None,
    held_out: int | None,
    plot: Path | None,
    agent: str | None,
    keep_stack: bool,
) -> None:
    """Show an agent learning: SmolLM2-135M on single-digit multiplication (or, with
    --agent bash, on generated shell tasks through the harness in sandboxes), held-out
    reward before and after RL through the gateway, Kafka, the processors, the trainer and
    the model server's reload; the stack is started, and stopped at the end."""
    import time

    from rllm.app.demo import DemoConfig, run_demo
    from rllm.cli.stack import stack_settings
    from rllm.infra.stack import stack_down, stack_up
    from rllm.settings import KafkaSettings

    flags = {
        "max_updates": max_updates,
        "max_minutes": max_minutes,
        "target_reward": target_reward,
        "held_out": held_out,
        "plot": plot,
        "agent": agent,
    }
    stack = stack_settings()
    config = DemoConfig(
        gateway_url=f"http://127.0.0.1:{stack.gateway_port}",
        **{k: v for k, v in flags.items() if v is not None},
    )
    began = time.perf_counter()
    console.print(f"starting the local stack in {stack.home} ...")
    try:
        for status in stack_up(stack, say=console.print):
            console.print(f"{'up' if status.running else 'down'} {status.name} {status.address}")
        report = run_demo(
            config,
            KafkaSettings(bootstrap_servers=stack.bootstrap_servers),
            say=lambda line: console.print(line, markup=False),
        )
    finally:
        if not keep_stack:
            console.print("stopping the local stack ...")
            stack_down(stack)
    console.print(report.line(), markup=False)
    console.print(f"reward curve: {report.plot}", markup=False)
    console.print(
        f"{len(report.train.updates)} batches in {report.seconds['train'] / 60:.1f} min of "
        f"training; {(time.perf_counter() - began) / 60:.1f} min in all",
        markup=False,
    )
