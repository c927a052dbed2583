"""``rllm-cli replay``: build an SFT dataset from the event log or from the history."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    history_store_options,
    kafka_options,
    kafka_settings,
    reports_errors,
)

__all__ = ["replay"]


@click.command()
@click.option(
    "--source",
    type=click.Choice(["history", "topic"]),
    default="history",
    help="Read sessions from the history store or from rllm.session-events.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Dataset file: .jsonl or .parquet.",
)
@click.option("--start-offset", type=int, default=None, help="topic: first offset (per partition).")
@click.option("--end-offset", type=int, default=None, help="topic: offset to stop before.")
@click.option("--since", type=click.DateTime(), default=None, help="topic: emitted at or after.")
@click.option("--until", type=click.DateTime(), default=None, help="topic: emitted before.")
@click.option("--min-reward", type=float, default=None, help="Keep sessions with reward >= this.")
@click.option("--correct-only", is_flag=True, help="Keep sessions marked correct.")
@click.option(
    "--best-of-n",
    type=click.IntRange(min=1),
    default=None,
    help="Keep the n best sessions per (run, task).",
)
@click.option("--benchmark", default=None)
@click.option("--model", default=None)
@click.option("--run", default=None)
@click.option("--no-dedup", is_flag=True, help="Keep duplicate prompt+response pairs.")
@history_store_options
@kafka_options
@reports_errors
def replay(
    source: str,
    out: Path,
    start_offset: int | None,
    end_offset: int | None,
    since: datetime | None,
    until: datetime | None,
    min_reward: float | None,
    correct_only: bool,
    best_of_n: int | None,
    benchmark: str | None,
    model: str | None,
    run: str | None,
    no_dedup: bool,
    history_dir: Path | None,
    clickhouse_url: str | None,
    bootstrap_servers: str | None,
    topic_prefix: str | None,
) -> None:
    """Select sessions, restore full prompts, and write messages + token IDs."""
    from datetime import UTC

    from rllm.consumers.history import HistorySettings, open_store
    from rllm.consumers.replay import (
        ReplayFilter,
        select_examples,
        sessions_from_history,
        sessions_from_topic,
        write_dataset,
    )
    from rllm.consumers.replay.writers import check_dataset_path

    check_dataset_path(out)

    filt = ReplayFilter(
        min_reward=min_reward,
        correct_only=correct_only,
        best_of_n=best_of_n,
        benchmark=benchmark,
        model=model,
        run=run,
        dedup=not no_dedup,
    )
    if source == "topic":
        sessions = sessions_from_topic(
            kafka_settings(bootstrap_servers, topic_prefix),
            start_offset=start_offset,
            end_offset=end_offset,
            since=since.replace(tzinfo=UTC) if since else None,
            until=until.replace(tzinfo=UTC) if until else None,
        )
    else:
        overrides: dict[str, Any] = {
            k: v
            for k, v in {"history_dir": history_dir, "clickhouse_url": clickhouse_url}.items()
            if v
        }
        store = open_store(HistorySettings(**overrides))
        try:
            sessions = sessions_from_history(store, run)
        finally:
            store.close()
    n = write_dataset(select_examples(sessions, filt), out)
    console.print(f"replay: {len(sessions)} sessions -> {n} examples in {out}")
