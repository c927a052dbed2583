"""``rllm-cli eval BENCH``: run a benchmark through the gateway and print a summary table."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import console, reports_errors

__all__ = ["eval_command", "resolve_model"]


def resolve_model(name: str | None) -> str:
    """A model profile's upstream model name (``local`` → SmolLM2), else ``name`` as given."""
    from rllm.models.config import PROVIDERS, Provider, load_config

    config = load_config()
    if name is None:
        return config.get().model if config.active else PROVIDERS[Provider.LOCAL].model
    if name in config.profiles:
        return config.profiles[name].model
    if name in {p.value for p in Provider} and PROVIDERS[Provider(name)].model:
        return PROVIDERS[Provider(name)].model
    return name


@click.command("eval")
@click.argument("benchmark")
@click.option(
    "--model",
    "-m",
    default=None,
    help="Model profile (rllm-cli model setup), provider name or model name.",
)
@click.option("--agent", default=None, help="Built-in agent [default: the benchmark's].")
@click.option(
    "--attempts",
    "-k",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Attempts per task (pass@k).",
)
@click.option("--concurrency", "-c", type=click.IntRange(1), default=8, show_default=True)
@click.option("--max-examples", "-n", type=click.IntRange(1), default=None)
@click.option("--split", default=None, help="Dataset split [default: the benchmark's].")
@click.option(
    "--data-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Local JSONL or Parquet file in the dataset's format.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write one JSON line per attempt.",
)
@click.option("--temperature", type=float, default=None)
@click.option("--max-tokens", type=click.IntRange(1), default=None)
@click.option("--run-id", default=None, help="Run id [default: eval-<random>].")
@click.option(
    "--gateway-url",
    envvar="RLLM_GATEWAY_URL",
    default="http://127.0.0.1:8400",
    show_default=True,
    help="Gateway root URL (rllm-cli up starts one).",
)
@click.option(
    "--admin-key",
    envvar="RLLM_ADMIN_KEY",
    default=None,
    help="The gateway's admin key [env RLLM_ADMIN_KEY].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def eval_command(
    benchmark: str,
    model: str | None,
    agent: str | None,
    attempts: int,
    concurrency: int,
    max_examples: int | None,
    split: str | None,
    data_file: Path | None,
    output: Path | None,
    temperature: float | None,
    max_tokens: int | None,
    run_id: str | None,
    gateway_url: str,
    admin_key: str | None,
    as_json: bool,
) -> None:
    """Evaluate a model on BENCHMARK (see `rllm-cli bench list`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from rllm.producers.evaluation import EvalConfig, run_eval

    sampling: dict[str, Any] = {}
    if temperature is not None:
        sampling["temperature"] = temperature
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    fields: dict[str, Any] = {
        "benchmark": benchmark,
        "gateway_url": gateway_url,
        "model": resolve_model(model),
        "admin_key": admin_key,
        "agent": agent,
        "attempts": attempts,
        "concurrency": concurrency,
        "max_examples": max_examples,
        "split": split,
        "data_file": data_file,
        "output": output,
        "sampling": sampling,
    }
    if run_id:
        fields["run_id"] = run_id
    config = EvalConfig(**fields)
    console.print(f"eval {benchmark} · model {config.model} · run {config.run_id}")
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json,
    ) as bar:
        job = bar.add_task("attempts", total=None)
        correct = [0]

        def tick(outcome: Any, reward: Any) -> None:
            correct[0] += bool(reward is not None and reward.is_correct)
            bar.update(job, advance=1, description=f"attempts · {correct[0]} correct")

        summary = asyncio.run(
            run_eval(config, progress=tick, on_tasks=lambda n: bar.update(job, total=n))
        )
    if as_json:
        click.echo(json.dumps(asdict(summary)))
        return
    _table(summary)


def _table(summary: Any) -> None:
    from rich.table import Table

    table = Table(title=f"{summary.benchmark} · {summary.model} · run {summary.run_id}")
    for col in (
        "tasks",
        "attempts",
        "accuracy",
        *[f"pass@{k}" for k in summary.pass_at],
        "mean reward",
        "tokens in/out",
        "latency p50/p95",
        "errors",
        "time",
    ):
        table.add_column(col, justify="right")
    table.add_row(
        str(summary.tasks),
        str(summary.attempts),
        f"{summary.accuracy:.1%}",
        *[f"{v:.1%}" for v in summary.pass_at.values()],
        f"{summary.mean_reward:.3f}",
        f"{summary.prompt_tokens:,}/{summary.completion_tokens:,}",
        f"{summary.latency_p50_s:.2f}s/{summary.latency_p95_s:.2f}s",
        str(summary.errors),
        f"{summary.seconds:.1f}s",
    )
    console.print(table)
