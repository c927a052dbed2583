"""``rllm-cli eval BENCH``: run a benchmark through the gateway and print a summary table;
``rllm-cli eval DIR --agent NAME``: the same for a directory of Harbor task folders, each
run by a harness in a sandbox."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from rllm.cli.common import (
    console,
    err_console,
    harbor_options,
    image_substitute_option,
    image_substitutes,
    kafka_options,
    kafka_settings,
    print_table,
    reports_errors,
)

__all__ = [
    "HARNESS_CONCURRENCY",
    "LOCAL_CONCURRENCY",
    "LOCAL_MAX_TOKENS",
    "eval_command",
    "is_local_model",
    "resolve_model",
]

LOCAL_MAX_TOKENS = 512
"""Default completion budget for the local CPU model server (an unbounded chat reply from
a small model can run to its 8k context, minutes per call)."""
LOCAL_CONCURRENCY = 32
"""Default agent runs in flight for the local model server: its ``--max-batch``, since it
generates a batch to the end before starting the next (20 tasks in one batch of 20 take
about 0.6 of the time of batches of 8, 8 and 4 on two cores)."""


HARNESS_CONCURRENCY = 4
"""Default harness runs in flight on Harbor tasks: each holds a sandbox."""


def resolve_model(name: str | None) -> str:
    """A model profile's upstream model name (``local`` → SmolLM2), else ``name`` as given."""
    from rllm.models.profiles import PROVIDERS, Provider, load_config

    config = load_config()
    if name is None:
        return config.get().model if config.active else PROVIDERS[Provider.LOCAL].model
    if name in config.profiles:
        return config.profiles[name].model
    if name in {p.value for p in Provider} and PROVIDERS[Provider(name)].model:
        return PROVIDERS[Provider(name)].model
    return name


def is_local_model(name: str | None) -> bool:
    """Whether ``name`` (as ``resolve_model`` takes it) means the local model server."""
    from rllm.models.profiles import Provider, load_config

    config = load_config()
    if name is None:
        return not config.active or config.get().provider is Provider.LOCAL
    if name in config.profiles:
        return config.profiles[name].provider is Provider.LOCAL
    return name == Provider.LOCAL.value


@click.command("eval")
@click.argument("benchmark", metavar="BENCHMARK|DIR")
@click.option(
    "--model",
    "-m",
    default=None,
    help="Model profile (rllm-cli model setup), provider name or model name.",
)
@click.option(
    "--agent",
    default=None,
    help="Built-in agent [default: the benchmark's]; on Harbor tasks the harness "
    "(oracle, bash, react, ...: rllm-cli harness list).",
)
@click.option(
    "--attempts",
    "-k",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Attempts per task (pass@k).",
)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(1),
    default=None,
    help=f"Agent runs in flight [8; {LOCAL_CONCURRENCY} for the local model, whose server "
    "generates a whole batch at once].",
)
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
@click.option(
    "--max-tokens",
    type=click.IntRange(1),
    default=None,
    help=f"Completion budget per call [{LOCAL_MAX_TOKENS} for the local model, else the server's].",
)
@click.option("--run-id", default=None, help="Run id [default: eval-<random>].")
@click.option(
    "--policy",
    default=None,
    metavar="base|latest|RUN:VERSION",
    help="Policy to evaluate: the base weights, the newest a training run published, or one "
    "checkpoint (rllm-cli checkpoints ls); served for this eval, then the one served before "
    "[default: whatever the stack serves now, named in the first line].",
)
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
@harbor_options(
    "Harbor task folders of an agentic benchmark (terminal_bench2, swebench_verified, ...).",
    "Sandboxes of the harness runs: local, docker, daytona, modal "
    "[default: local; env RLLM_SANDBOX_BACKEND].",
)
@click.option(
    "--artifacts-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the harnesses' own log files here, one folder per session.",
)
@image_substitute_option
@kafka_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def eval_command(
    benchmark: str,
    model: str | None,
    agent: str | None,
    attempts: int,
    concurrency: int | None,
    max_examples: int | None,
    split: str | None,
    data_file: Path | None,
    output: Path | None,
    temperature: float | None,
    max_tokens: int | None,
    run_id: str | None,
    policy: str | None,
    gateway_url: str,
    admin_key: str | None,
    tasks_dir: Path | None,
    sandbox_backend: str | None,
    agent_timeout_multiplier: float,
    verifier_timeout_multiplier: float,
    artifacts_dir: Path | None,
    image_substitute: tuple[str, ...],
    bootstrap_servers: str | None,
    topic_prefix: str | None,
    as_json: bool,
) -> None:
    """Evaluate a model on BENCHMARK (see `rllm-cli bench list`), or on a DIR of Harbor
    task folders under the harness --agent."""
    from rllm.app.evaluate import evaluate
    from rllm.producers.evaluation import EvalConfig
    from rllm.producers.evaluation.harbor import is_tasks_dir

    sampling: dict[str, Any] = {}
    if temperature is not None:
        sampling["temperature"] = temperature
    if max_tokens is not None or is_local_model(model):
        sampling["max_tokens"] = max_tokens if max_tokens is not None else LOCAL_MAX_TOKENS
    if concurrency is None:
        harbor = tasks_dir is not None or is_tasks_dir(benchmark)
        local = LOCAL_CONCURRENCY if is_local_model(model) else 8
        concurrency = HARNESS_CONCURRENCY if harbor else local
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
        "tasks_dir": tasks_dir,
        "sandbox_backend": sandbox_backend,
        "agent_timeout_multiplier": agent_timeout_multiplier,
        "verifier_timeout_multiplier": verifier_timeout_multiplier,
        "artifacts_dir": artifacts_dir,
        "image_substitutes": image_substitutes(image_substitute),
    }
    if run_id:
        fields["run_id"] = run_id
    config = EvalConfig(**fields)
    err_console.print(
        f"eval {benchmark} · model {config.model} · run {config.run_id}"
        + (f" · policy {policy}" if policy else ""),
        markup=False,
    )
    bar = _AttemptsBar(disabled=as_json)
    try:
        kafka = kafka_settings(bootstrap_servers, topic_prefix)
        summary = evaluate(config, policy, kafka, progress=bar.tick, on_tasks=bar.begin)
    finally:
        bar.stop()
    if as_json:
        click.echo(json.dumps(asdict(summary)))
        return
    _table(summary)


class _AttemptsBar:
    """The attempts' progress on stderr, shown only once the tasks loaded and the gateway
    answered: a refusal stays one line, and stdout holds only the summary."""

    def __init__(self, disabled: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            disable=disabled,
        )
        self.job = self.bar.add_task("attempts", total=None, start=False)
        self.correct, self.started = 0, False

    def begin(self, total: int) -> None:
        self.bar.update(self.job, total=total)
        self.bar.start_task(self.job)
        self.bar.start()
        self.started = True

    def tick(self, outcome: Any, reward: Any) -> None:
        self.correct += bool(reward is not None and reward.is_correct)
        self.bar.update(self.job, advance=1, description=f"attempts · {self.correct} correct")

    def stop(self) -> None:
        if self.started:
            self.bar.stop()


def _table(summary: Any) -> None:
    """One metric per row, so the table fits a narrow (or non-terminal) console."""
    from rich.table import Table

    table = Table(title=f"{summary.benchmark} · {summary.model} · run {summary.run_id}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("tasks", str(summary.tasks)),
        ("attempts per task", str(summary.attempts)),
        ("accuracy", f"{summary.accuracy:.1%}"),
        *[(f"pass@{k}", f"{v:.1%}") for k, v in summary.pass_at.items()],
        ("mean reward", f"{summary.mean_reward:.3f}"),
        ("tokens in/out", f"{summary.prompt_tokens:,}/{summary.completion_tokens:,}"),
        ("latency p50/p95", f"{summary.latency_p50_s:.2f}s/{summary.latency_p95_s:.2f}s"),
        ("errors", str(summary.errors)),
        ("policy version", summary.policy_label),
        ("time", f"{summary.seconds:.1f}s"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    print_table(table)
    for failure in summary.failures:  # after the table, as before (--json for scripts)
        console.print(
            f"[red]error[/red] {escape(failure['task'])}: {escape(failure['error'])}", markup=True
        )
    for line in summary.notes(shown=len(summary.verifications)):
        console.print(escape(line), markup=True)
