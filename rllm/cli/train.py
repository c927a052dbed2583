"""``rllm-cli train``: run the trainer consumer on rllm.episodes with a backend; with
``--benchmark`` or ``--tasks-dir`` (Harbor task folders under a harness), the whole loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    err_console,
    kafka_options,
    kafka_settings,
    print_table,
    reports_errors,
)
from rllm.cli.groups import GroupedCommand

__all__ = ["train"]

OPTION_GROUPS = (
    (
        "Trainer (every mode)",
        ("backend", "model", "run_id", "checkpoint_dir", "batch_size", "max_updates"),
    ),
    (
        "Objective",
        (
            "loss",
            "loss_agg",
            "lr",
            "kl_coef",
            "clip_eps_low",
            "clip_eps_high",
            "lora_rank",
            "precision",
        ),
    ),
    ("Episodes and staleness", ("mode", "max_staleness", "uniform_reward", "idle_exit_s")),
    ("Distillation (--loss distill)", ("teacher_model", "teacher_url", "teacher_api")),
    (
        "The whole loop (--benchmark or --tasks-dir: rollouts through the gateway)",
        (
            "benchmark",
            "max_examples",
            "agent",
            "group_size",
            "epochs",
            "temperature",
            "max_tokens",
            "max_minutes",
            "served_model",
            "gateway_url",
        ),
    ),
    (
        "Harbor tasks (--tasks-dir)",
        (
            "tasks_dir",
            "sandbox_backend",
            "agent_timeout_multiplier",
            "verifier_timeout_multiplier",
        ),
    ),
    ("SFT on a file (--loss sft --data-file)", ("data_file", "offline")),
    ("Kafka", ("bootstrap_servers", "topic_prefix")),
)
"""How ``rllm-cli train --help`` groups its options: the trainer's, then each mode's."""


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
@click.option(
    "--backend",
    type=click.Choice(["local", "verl", "tinker", "fireworks"]),
    default=None,
    help="Training backend [default: local; env RLLM_BACKEND].",
)
@click.option("--model", default=None, help="Local HF model dir or .gguf file (RLLM_TRAIN_MODEL).")
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
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Episodes (tasks) per update; with an SFT --data-file, sequences per update.",
)
@click.option("--mode", type=click.Choice(["sync", "async"]), default=None)
@click.option("--max-staleness", type=int, default=None, help="Versions, in async mode.")
@click.option("--uniform-reward", type=click.Choice(["drop", "keep"]), default=None)
@click.option("--lr", type=float, default=None, help="AdamW learning rate.")
@click.option("--kl-coef", type=float, default=None, help="KL penalty to the reference.")
@click.option(
    "--clip-eps-low", type=float, default=None, help="In [0, 1): the ratio's floor is 1 - this."
)
@click.option("--clip-eps-high", type=float, default=None)
@click.option("--lora-rank", type=int, default=None, help="0 trains all weights.")
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16"]),
    default=None,
    help="Local backend arithmetic; bf16 keeps float32 master weights [fp32; RLLM_PRECISION].",
)
@click.option("--teacher-model", default=None, help="Teacher model dir (loss=distill).")
@click.option(
    "--teacher-url",
    default=None,
    help="Served teacher's base URL (loss=distill; vLLM, SGLang or rllm-cli serve; "
    "RLLM_TEACHER_URL, key in RLLM_TEACHER_API_KEY).",
)
@click.option(
    "--teacher-api",
    type=click.Choice(["vllm", "sglang"]),
    default=None,
    help="How the teacher is asked [default: vllm; env RLLM_TEACHER_API].",
)
@click.option("--checkpoint-dir", default=None, help="Where checkpoints go.")
@click.option("--run-id", default=None, help="Training run id.")
@click.option(
    "--max-updates",
    type=click.IntRange(0),
    default=None,
    help="Stop after N policy updates made (a batch whose groups were all dropped, as "
    "uniform or stale, makes none and does not count; 0: no limit).",
)
@click.option(
    "--idle-exit",
    "idle_exit_s",
    type=float,
    default=None,
    help="Stop after this many seconds without episodes.",
)
@click.option(
    "--benchmark",
    default=None,
    help="Also drive the rollouts: run this benchmark's tasks through the gateway "
    "(e.g. multiply); without it the trainer only consumes rllm.episodes.",
)
@click.option(
    "--data-file",
    default=None,
    help="Local JSONL/Parquet rows for --benchmark; without --benchmark (and with --loss "
    "sft) the SFT dataset to train on (from rllm-cli replay --out), with no episodes consumed.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="SFT on --data-file: publish no PolicyUpdated even when a broker is configured "
    "(without -b / RLLM_BOOTSTRAP_SERVERS nothing is published anyway).",
)
@click.option(
    "--tasks-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Also drive the rollouts: train on these Harbor task folders, each rollout the "
    "harness --agent in a sandbox, rewarded by the task's verifier (with --benchmark, an "
    "agentic one such as terminal_bench2).",
)
@click.option(
    "--sandbox-backend",
    envvar="RLLM_SANDBOX_BACKEND",
    default=None,
    help="--tasks-dir: sandboxes of the harness runs [default: local; env RLLM_SANDBOX_BACKEND].",
)
@click.option(
    "--agent-timeout-multiplier",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="--tasks-dir: scales each task's [agent] timeout_sec.",
)
@click.option(
    "--verifier-timeout-multiplier",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="--tasks-dir: scales each task's [verifier] timeout_sec.",
)
@click.option("--max-examples", type=int, default=None, help="Only the first N tasks.")
@click.option(
    "--agent",
    default=None,
    help="Built-in agent [the benchmark's]; with --tasks-dir the harness (rllm-cli harness list).",
)
@click.option("--group-size", type=int, default=8, show_default=True, help="Rollouts per task.")
@click.option(
    "--epochs",
    type=int,
    default=1,
    show_default=True,
    help="Passes over the tasks (--benchmark) or over the SFT --data-file.",
)
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--max-tokens", type=int, default=64, show_default=True)
@click.option(
    "--max-minutes",
    type=float,
    default=None,
    help="--benchmark: start no new batch after this many minutes.",
)
@click.option(
    "--served-model", default=None, help="Model name the rollouts request [the local model's]."
)
@click.option(
    "--gateway-url", envvar="RLLM_GATEWAY_URL", default="http://127.0.0.1:8400", show_default=True
)
@kafka_options
@reports_errors
def train(bootstrap_servers: str | None, topic_prefix: str | None, **flags: Any) -> None:
    """Consume episodes, update the policy, publish PolicyUpdated, checkpoint; with
    --benchmark, run the whole loop (rollouts through the gateway, episodes from the
    processors, updates picked up by the model server); with --loss sft --data-file FILE,
    SFT on a dataset from rllm-cli replay (publishing PolicyUpdated only when -b is given)."""
    from rllm.app import describe_drops
    from rllm.consumers.trainer.loop import run_trainer
    from rllm.consumers.trainer.settings import TrainerSettings

    kafka = kafka_settings(bootstrap_servers, topic_prefix)
    loop = {k: flags.pop(k) for k in _LOOP_OPTIONS}
    offline = bool(flags.pop("offline"))
    fields = {k: v for k, v in flags.items() if v is not None}
    if loop["benchmark"] is not None or loop["tasks_dir"] is not None:
        _loop(loop, fields, kafka)
        return
    settings = TrainerSettings(**fields)
    if loop["data_file"] is not None:
        _sft(settings, loop, None if offline or not bootstrap_servers else kafka)
        return
    from rllm.consumers.backends import backend_capabilities
    from rllm.consumers.trainer.types import check_capabilities

    check_capabilities(settings, settings.backend.value, backend_capabilities(settings.backend))
    preflight(kafka, None)
    report = run_trainer(settings, kafka)
    console.print(
        f"trained {report.updates} update(s); policy version {report.version}; "
        f"episodes consumed {report.episodes_consumed}; {describe_drops(report.drops)}"
    )
    failure = report.all_refused()
    if failure is not None:
        from rllm.errors import RllmError

        raise RllmError(f"trainer run {settings.run_id}: {failure}")


def preflight(kafka: Any, gateway_url: str | None) -> None:
    """Check the broker (and the gateway the rollouts go through) answer before anything
    loads a model or writes a checkpoint.

    Raises:
        KafkaUnavailableError / ConfigError: naming the address and ``rllm-cli up``.
    """
    import httpx

    from rllm.errors import ConfigError
    from rllm.kafka import check_broker

    check_broker(kafka, timeout_s=5.0)
    if gateway_url is None:
        return
    try:
        httpx.get(f"{gateway_url.rstrip('/')}/health", timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"the gateway at {gateway_url} does not answer ({type(exc).__name__}: {exc}); "
            f"start the stack with `rllm-cli up`, or pass --gateway-url"
        ) from exc


_LOOP_OPTIONS = (
    "benchmark",
    "tasks_dir",
    "sandbox_backend",
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "max_minutes",
    "data_file",
    "max_examples",
    "agent",
    "group_size",
    "epochs",
    "temperature",
    "max_tokens",
    "served_model",
    "gateway_url",
)


def _loop(loop: dict[str, Any], fields: dict[str, Any], kafka: Any) -> None:
    """Run AgentTrainer with a built-in agent on a benchmark, or with a harness on Harbor
    task folders (the flags in ``loop``)."""
    from rich.table import Table

    from rllm.app import TrainConfig, describe_drops
    from rllm.cli.eval import resolve_model

    backend = str(fields.pop("backend", "local"))
    top = {k: fields.pop(k) for k in ("run_id", "batch_size", "mode", "max_updates") if k in fields}
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


def _sft(settings: Any, loop: dict[str, Any], kafka: Any) -> None:
    """SFT on a replayed dataset file (``--data-file`` without ``--benchmark``)."""
    from pathlib import Path

    from rllm.consumers.trainer.sft_loop import train_sft
    from rllm.consumers.trainer.types import LossKind
    from rllm.errors import ConfigError

    if settings.loss is not LossKind.SFT:
        raise ConfigError(
            f"--data-file without --benchmark is an SFT dataset, but the loss is "
            f"{settings.loss.value}; add --loss sft (or give --benchmark for RL on its tasks)"
        )
    unused = [k for k in ("max_examples", "agent", "served_model") if loop[k] is not None]
    if unused:
        raise ConfigError(f"--{unused[0].replace('_', '-')} applies only with --benchmark")
    err_console.print(
        f"sft {settings.run_id} on {loop['data_file']}: loading the {settings.backend.value} "
        f"backend ...",
        markup=False,
    )
    report = train_sft(
        settings,
        Path(loop["data_file"]),
        kafka=kafka,
        epochs=loop["epochs"],
        on_update=lambda p: err_console.print(f"sft {settings.run_id}: {p}", markup=False),
    )
    losses = report.losses
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
    console.print(
        f"trained {report.updates} update(s), {report.tokens} tokens; policy version "
        f"{report.version}"
        + (f"; loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else "")
        + (f"; {report.published} PolicyUpdated published" if kafka is not None else "")
        + (f"; checkpoint {report.checkpoint_uri}" if report.checkpoint_uri else "")
    )


def _progress(u: Any) -> None:
    """One line per batch while the loop runs (``UpdateRecord``'s own line)."""
    console.print(str(u), markup=False)
