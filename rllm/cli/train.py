"""``rllm-cli train``: run the trainer consumer on rllm.episodes with a backend."""

from __future__ import annotations

from typing import Any

import click

from rllm.cli.common import console, kafka_options, kafka_settings, reports_errors

__all__ = ["train"]


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["local", "verl", "tinker", "fireworks"]),
    default=None,
    help="Training backend [default: local; env RLLM_BACKEND].",
)
@click.option("--model", default=None, help="Local HF model dir or .gguf file (RLLM_MODEL).")
@click.option(
    "--loss",
    type=click.Choice(["grpo", "reinforce", "rloo", "sft", "distill"]),
    default=None,
    help="Objective [default: grpo].",
)
@click.option(
    "--loss-agg",
    type=click.Choice(["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]),
    default=None,
)
@click.option("--batch-size", type=int, default=None, help="Episodes (tasks) per update.")
@click.option("--mode", type=click.Choice(["sync", "async"]), default=None)
@click.option("--max-staleness", type=int, default=None, help="Versions, in async mode.")
@click.option("--uniform-reward", type=click.Choice(["drop", "keep"]), default=None)
@click.option("--lr", type=float, default=None, help="AdamW learning rate.")
@click.option("--kl-coef", type=float, default=None, help="KL penalty to the reference.")
@click.option("--clip-eps-low", type=float, default=None)
@click.option("--clip-eps-high", type=float, default=None)
@click.option("--lora-rank", type=int, default=None, help="0 trains all weights.")
@click.option("--teacher-model", default=None, help="Teacher model dir (loss=distill).")
@click.option("--checkpoint-dir", default=None, help="Where checkpoints go.")
@click.option("--run-id", default=None, help="Training run id.")
@click.option("--max-updates", type=int, default=None, help="Stop after N updates.")
@click.option(
    "--idle-exit",
    "idle_exit_s",
    type=float,
    default=None,
    help="Stop after this many seconds without episodes.",
)
@kafka_options
@reports_errors
def train(bootstrap_servers: str | None, topic_prefix: str | None, **flags: Any) -> None:
    """Consume episodes, update the policy, publish PolicyUpdated, checkpoint."""
    from rllm.consumers.trainer.loop import run_trainer
    from rllm.consumers.trainer.settings import TrainerSettings

    settings = TrainerSettings(**{k: v for k, v in flags.items() if v is not None})
    report = run_trainer(settings, kafka_settings(bootstrap_servers, topic_prefix))
    console.print(
        f"trained {report.updates} update(s); policy version {report.version}; "
        f"episodes consumed {report.episodes_consumed}; dropped {report.drops}"
    )
