"""``rllm-cli train sft``: SFT on a dataset file from ``rllm-cli replay --out``, publishing
PolicyUpdated only when a broker is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rllm.cli.common import console, err_console, kafka_options, kafka_settings, reports_errors
from rllm.cli.groups import GroupedCommand
from rllm.cli.train_options import KAFKA, OBJECTIVE, RUN, options

__all__ = ["sft"]

OPTION_GROUPS = (
    ("Data", ("data_file", "epochs", "offline")),
    ("Trainer", RUN),
    ("Objective (the loss is sft)", OBJECTIVE),
    KAFKA,
)
"""How ``rllm-cli train sft --help`` groups its options."""


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
@click.option(
    "--data-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The JSONL/Parquet dataset to train on (from rllm-cli replay --out).",
)
@click.option(
    "--epochs",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Passes over the file, counted across resumes.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Publish no PolicyUpdated even when a broker is configured (without -b / "
    "RLLM_BOOTSTRAP_SERVERS nothing is published anyway).",
)
@options(*RUN, *OBJECTIVE)
@kafka_options
@reports_errors
def sft(
    data_file: Path,
    epochs: int,
    offline: bool,
    bootstrap_servers: str | None,
    topic_prefix: str | None,
    **flags: Any,
) -> None:
    """SFT on a replayed dataset: cross-entropy on its sampled tokens, checkpointed like
    the RL trainer's (a rerun with the same --run-id resumes)."""
    from rllm.consumers.trainer.settings import TrainerSettings
    from rllm.consumers.trainer.sft_loop import train_sft

    settings = TrainerSettings(**{k: v for k, v in flags.items() if v is not None})
    kafka = (
        None
        if offline or not bootstrap_servers
        else kafka_settings(bootstrap_servers, topic_prefix)
    )
    err_console.print(
        f"sft {settings.run_id} on {data_file}: loading the {settings.backend.value} backend ...",
        markup=False,
    )
    report = train_sft(
        settings,
        data_file,
        kafka=kafka,
        epochs=epochs,
        on_update=lambda p: err_console.print(f"sft {settings.run_id}: {p}", markup=False),
    )
    console.print(
        f"sft on {report.data_file}: {report.rows} rows -> {report.sequences} sequences "
        f"({report.tokens_per_epoch} loss tokens per epoch; {report.text_rows} tokenized "
        f"from text; {report.duplicates_skipped} duplicate rows skipped)"
    )
    if report.already_complete:
        console.print(
            f"run {settings.run_id} is already complete: its checkpoint v{report.version} "
            f"trained all {report.epochs} epoch(s) of this file, so nothing was trained; use "
            f"another --run-id for a new run, or a larger --epochs to train on",
            markup=False,
        )
        return
    losses = report.losses
    console.print(
        f"trained {report.updates} update(s), {report.tokens} tokens; policy version "
        f"{report.version}"
        + (f"; loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else "")
        + (f"; {report.published} PolicyUpdated published" if kafka is not None else "")
        + (f"; checkpoint {report.checkpoint_uri}" if report.checkpoint_uri else "")
    )
