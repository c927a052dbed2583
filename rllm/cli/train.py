"""``rllm-cli train``: the whole loop (rollouts of ``--benchmark``'s tasks, or of Harbor
task folders under a harness, through the gateway; episodes from the processors; updates
by a trainer in this process). ``train consume`` runs the trainer consumer alone and
``train sft`` trains on a replayed dataset file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from rllm.app.config import TrainConfig
from rllm.cli.common import (
    console,
    err_console,
    harbor_options,
    kafka_options,
    kafka_settings,
    print_table,
    reports_errors,
)
from rllm.cli.groups import GroupedGroup
from rllm.cli.train_consume import consume
from rllm.cli.train_options import (
    DISTILL,
    OBJECTIVE,
    RUN,
    config_option,
    options,
    preflight,
    rl_option_groups,
)
from rllm.cli.train_sft import sft
from rllm.errors import ConfigError

__all__ = ["OPTION_GROUPS", "train"]

EPISODES = ("mode", "max_staleness", "uniform_reward")
"""How the loop's episodes are batched."""
LOOP = (
    "benchmark",
    "data_file",
    "max_examples",
    "agent",
    "group_size",
    "epochs",
    "temperature",
    "max_tokens",
    "max_minutes",
    "served_model",
    "gateway_url",
)
"""The rollouts of ``--benchmark``."""
HARBOR = ("tasks_dir", "sandbox_backend", "agent_timeout_multiplier", "verifier_timeout_multiplier")
"""The rollouts of ``--tasks-dir``."""
OPTION_GROUPS = rl_option_groups(
    EPISODES,
    ("The whole loop (rollouts through the gateway)", LOOP),
    ("Harbor tasks (--tasks-dir)", HARBOR),
)
"""How ``rllm-cli train --help`` groups its options."""
_SAMPLING = TrainConfig.model_fields["sampling"].get_default(call_default_factory=True)


@click.group(
    cls=GroupedGroup, option_groups=OPTION_GROUPS, invoke_without_command=True, name="train"
)
@options(*RUN, *OBJECTIVE)
@config_option("mode", help="sync: each batch waits for the previous update to be served.")
@options("max_staleness", "uniform_reward", *DISTILL)
@click.option(
    "--benchmark",
    default=None,
    help="Train on this benchmark's tasks (e.g. multiply), rolled out through the gateway.",
)
@click.option("--data-file", default=None, help="Local JSONL/Parquet rows for --benchmark.")
@click.option("--max-examples", type=int, default=None, help="Only the first N tasks.")
@click.option(
    "--agent",
    default=None,
    help="Built-in agent [the benchmark's]; with --tasks-dir the harness (rllm-cli harness list).",
)
@config_option("group_size", help="Rollouts per task.")
@config_option("epochs", help="Passes over the tasks.")
@click.option("--temperature", type=float, default=_SAMPLING["temperature"], show_default=True)
@click.option("--max-tokens", type=int, default=_SAMPLING["max_tokens"], show_default=True)
@config_option("max_minutes", help="Start no new batch after this many minutes (0: no limit).")
@click.option(
    "--served-model", default=None, help="Model name the rollouts request [the local model's]."
)
@click.option(
    "--gateway-url", envvar="RLLM_GATEWAY_URL", default="http://127.0.0.1:8400", show_default=True
)
@harbor_options(
    "Train on these Harbor task folders instead, each rollout the harness --agent in a "
    "sandbox, rewarded by the task's verifier (with --benchmark, an agentic one such as "
    "terminal_bench2).",
    "Sandboxes of the harness runs [default: local; env RLLM_SANDBOX_BACKEND].",
)
@kafka_options
@click.pass_context
@reports_errors
def train(
    ctx: click.Context, /, bootstrap_servers: str | None, topic_prefix: str | None, **flags: Any
) -> None:
    """Train with RL through the whole pipeline: rollouts of --benchmark's tasks (or of
    --tasks-dir's Harbor tasks under a harness) through the gateway, episodes from the
    processors, updates by a trainer in this process, picked up by the model server.
    `train consume` runs the trainer consumer alone; `train sft` trains on a file."""
    if ctx.invoked_subcommand is not None:
        _options_of_the_loop_only(ctx)
        return
    loop = {k: flags.pop(k) for k in (*LOOP, *HARBOR)}
    if loop["benchmark"] is None and loop["tasks_dir"] is None:
        raise ConfigError(_what_to_train(loop["data_file"]))
    top = {k: flags.pop(k) for k in ("mode", "run_id", "batch_size", "max_updates")}
    fields = {k: v for k, v in flags.items() if v is not None}  # the trainer's given
    _loop(
        loop,
        {k: v for k, v in top.items() if v is not None},
        fields,
        kafka_settings(bootstrap_servers, topic_prefix),
    )


train.add_command(consume)
train.add_command(sft)


def _options_of_the_loop_only(ctx: click.Context) -> None:
    """Refuse loop options given before a subcommand's name (they would be ignored)."""
    given = [
        max(p.opts, key=len)
        for p in ctx.command.params
        if p.name and ctx.get_parameter_source(p.name) is click.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"{given[0]} comes after `train {ctx.invoked_subcommand}` (options before it are "
            f"the whole loop's)"
        )


def _what_to_train(data_file: str | None) -> str:
    """Why ``train`` without --benchmark or --tasks-dir has nothing to train on."""
    if data_file is not None:
        return (
            f"--data-file {data_file} without --benchmark is an SFT dataset: train on it with "
            f"`rllm-cli train sft --data-file {data_file}` (or give --benchmark for RL on its "
            f"tasks)"
        )
    return (
        "the whole loop trains on --benchmark's tasks or --tasks-dir's; `rllm-cli train "
        "consume` runs the trainer consumer alone, `rllm-cli train sft --data-file F` trains "
        "on a file"
    )


def _loop(loop: dict[str, Any], top: dict[str, Any], fields: dict[str, Any], kafka: Any) -> None:
    """Run AgentTrainer with a built-in agent on a benchmark, or with a harness on Harbor
    task folders (the flags in ``loop``; ``top``: TrainConfig's own fields, ``fields``:
    the trainer's)."""
    from rich.table import Table

    from rllm.app import describe_drops
    from rllm.cli.eval import resolve_model

    backend = str(fields.pop("backend", "local"))
    config = TrainConfig(
        gateway_url=loop["gateway_url"],
        model=loop["served_model"] or resolve_model("local"),
        group_size=loop["group_size"],
        epochs=loop["epochs"],
        sampling={"temperature": loop["temperature"], "max_tokens": loop["max_tokens"]},
        max_minutes=loop["max_minutes"] or 0.0,
        trainer=fields,
        **top,
    )
    if loop["tasks_dir"] is not None:
        trainer, what, close = _harbor_trainer(loop, config, backend, kafka)
    else:
        trainer, what, close = _benchmark_trainer(loop, config, backend, kafka)
    try:
        trainer.check()  # bad settings first (before any line), the stack, the model loads
        console.print(
            f"training on {what}: {len(trainer.train_tasks)} tasks x {loop['group_size']} "
            f"rollouts, {config.batch_size} tasks per update, run {config.run_id}"
        )
        preflight(kafka, loop["gateway_url"])
        report = trainer.train(on_update=_progress, progress=False)  # its own lines, on stdout
    finally:
        close()
    table = Table(title=f"run {report.run_id}")
    for col in ("update", "rollouts of", "reward", "accuracy", "rollouts", "seconds", "then"):
        table.add_column(col, justify="right")
    for i, u in enumerate(report.updates, 1):
        table.add_row(
            str(i),
            f"v{u.rollout_version}",
            f"{u.reward_mean:.3f}",
            f"{u.accuracy:.1%}",
            str(u.rollouts),
            f"{u.seconds:.1f}",
            f"v{u.version}" if u.version != u.rollout_version else "no update",
        )
    print_table(table)
    console.print(f"policy version {report.version}; {describe_drops(report.drops)}")


def _benchmark_trainer(
    loop: dict[str, Any], config: Any, backend: str, kafka: Any
) -> tuple[Any, str, Callable[[], None]]:
    """AgentTrainer of a built-in agent on ``--benchmark``'s tasks."""
    from rllm.app import AgentTrainer
    from rllm.benchmarks.loaders import load_tasks
    from rllm.benchmarks.registry import get_benchmark
    from rllm.producers.sdk import builtin_agent

    spec = get_benchmark(loop["benchmark"])
    tasks = load_tasks(spec, data_file=loop["data_file"], max_examples=loop["max_examples"])
    trainer = AgentTrainer(
        builtin_agent(loop["agent"] or spec.agent),
        train_dataset=tasks,
        backend=backend,
        config=config,
        kafka=kafka,
    )
    return trainer, spec.name, lambda: None


def _harbor_trainer(
    loop: dict[str, Any], config: Any, backend: str, kafka: Any
) -> tuple[Any, str, Callable[[], None]]:
    """AgentTrainer of the harness ``--agent`` on the task folders of ``--tasks-dir``, each
    rollout rewarded by its task's verifier; folders that do not load are named and left
    out."""
    import asyncio

    from rllm.app import AgentTrainer
    from rllm.errors import ConfigError
    from rllm.producers.evaluation.harbor import open_harbor_run
    from rllm.producers.harnesses import verifier_evaluator

    if loop["data_file"] is not None:
        raise ConfigError(
            f"--data-file {loop['data_file']} and --tasks-dir {loop['tasks_dir']} both name "
            f"the tasks; give one"
        )
    run = open_harbor_run(
        loop["tasks_dir"],
        loop["agent"],
        run_id=config.run_id,
        benchmark=loop["benchmark"],
        sandbox_backend=loop["sandbox_backend"],
        agent_timeout_multiplier=loop["agent_timeout_multiplier"],
        verifier_timeout_multiplier=loop["verifier_timeout_multiplier"],
        max_examples=loop["max_examples"],
    )
    for task, error in run.unloaded:
        err_console.print(f"[red]error[/red] task {task} left out: {error}", markup=True)
    if not run.rows:
        asyncio.run(run.backend.aclose())
        raise ConfigError(f"no task in {loop['tasks_dir']} loads; nothing to train on")
    trainer = AgentTrainer(
        run.rollout,
        evaluator=verifier_evaluator,
        train_dataset=run.rows,
        backend=backend,
        config=config,
        kafka=kafka,
    )
    return (
        trainer,
        f"{run.dataset.name} with harness {run.rollout.harness.name}",
        (lambda: asyncio.run(run.backend.aclose())),
    )


def _progress(u: Any) -> None:
    """One line per batch while the loop runs (``UpdateRecord``'s own line)."""
    console.print(str(u), markup=False)
