"""``rllm-cli bench list|info|pull|check|gen``: browse the benchmark registry, cache
datasets, validate Harbor task folders, and generate families of small ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from rllm.cli.common import (
    console,
    image_substitute_option,
    image_substitutes,
    print_rows,
    print_table,
    reports_errors,
)

__all__ = ["bench"]


@click.group()
def bench() -> None:
    """Benchmarks: list the registry, show one entry, pull its data, check task folders,
    generate a task family."""


@bench.command("list")
@click.option("--category", "-c", default=None, help="Only this category (math, code, mcq, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@reports_errors
def list_(category: str | None, as_json: bool) -> None:
    """Every registered benchmark."""
    from rllm.benchmarks import Category, all_benchmarks

    if category is not None and category not in {c.value for c in Category}:
        raise click.BadParameter(
            f"{category!r} is not a category; use one of {', '.join(c.value for c in Category)}",
            param_hint="--category",
        )
    specs = all_benchmarks(category)
    if as_json:
        click.echo(
            json.dumps(
                [
                    s.model_dump(
                        mode="json",
                        include={
                            "name",
                            "title",
                            "category",
                            "hf_id",
                            "config",
                            "split",
                            "reward_fn",
                            "agent",
                            "needs",
                            "aliases",
                        },
                    )
                    for s in specs
                ],
                indent=2,
                sort_keys=True,
            )
        )
        return
    table = Table(title=f"{len(specs)} benchmarks", box=box.SIMPLE_HEAD)
    for column in ("name", "category", "dataset", "split", "reward", "agent", "needs"):
        # a name stays whole on a narrow terminal; a dataset id folds, as it has no spaces
        table.add_column(
            column,
            overflow="fold",
            no_wrap=column == "name",
            min_width=20 if column == "dataset" else None,
        )
    for s in specs:
        dataset = s.hf_id or s.source
        if s.config:
            dataset += f" [{s.config}]"
        table.add_row(
            escape(s.name),
            s.category.value,
            escape(dataset),
            s.split,
            s.reward_fn,
            s.agent,
            ", ".join(sorted(n.value for n in s.needs)),
        )
    print_table(table)


@bench.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the whole entry as JSON.")
@reports_errors
def info(name: str, as_json: bool) -> None:
    """One benchmark's entry: source, field mapping, prompt, grader."""
    from rllm.benchmarks import get_benchmark
    from rllm.benchmarks.loaders import cache_path

    spec = get_benchmark(name)
    if as_json:
        click.echo(json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True))
        return
    cached = cache_path(spec, spec.split)
    rows = [
        ("name", spec.name),
        ("title", spec.title),
        ("category", spec.category.value),
        ("aliases", ", ".join(spec.aliases) or "-"),
        ("description", spec.description),
        ("dataset", spec.hf_id or "-"),
        ("config", spec.config or "-"),
        ("split", spec.split),
        ("source", spec.source),
        ("fields", ", ".join(f"{k}<-{v}" for k, v in {**spec.fields, **spec.optional}.items())),
        ("adapter", spec.adapter or "-"),
        ("reward fn", spec.reward_fn),
        ("agent", spec.agent),
        ("needs", ", ".join(sorted(spec.needs)) or "-"),
        ("cached", str(cached) if cached.is_file() else "no"),
    ]
    table = Table(show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value)
    print_table(table)
    console.print("[bold]prompt template[/bold]")
    console.print(spec.prompt.replace("{{", "{").replace("}}", "}"), markup=False)


@bench.command()
@click.argument("name")
@click.option("--split", default=None, help="Split to pull [default: the entry's].")
@reports_errors
def pull(name: str, split: str | None) -> None:
    """Download a benchmark's split into the local cache (RLLM_BENCH_CACHE_DIR)."""
    from rllm.benchmarks import get_benchmark
    from rllm.benchmarks.loaders import pull as pull_split
    from rllm.benchmarks.loaders import read_rows

    spec = get_benchmark(name)
    path = pull_split(spec, split)
    console.print(f"pulled {spec.name} ({len(read_rows(path))} rows) to {path}")


@bench.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@image_substitute_option
@reports_errors
def check(directory: Path, as_json: bool, image_substitute: tuple[str, ...]) -> None:
    """Validate the Harbor task folders in DIRECTORY (or DIRECTORY itself when it is one):
    task.toml, instruction.md, environment/Dockerfile, tests/test.sh. Exit 1 when any is
    invalid."""
    from rllm.benchmarks.harbor import check_tasks

    given = image_substitutes(image_substitute)
    checks = check_tasks(directory, substitutes=given or None)
    invalid = [c for c in checks if not c.ok]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "directory": str(directory.resolve()),
                    "tasks": len(checks),
                    "valid": len(checks) - len(invalid),
                    "invalid": len(invalid),
                    "checks": [c.to_json() for c in checks],
                },
                indent=2,
            )
        )
    else:
        rows = []
        for c in checks:
            notes = [f"[red]{escape(p)}[/red]" for p in c.problems]
            notes += [f"[yellow]{escape(w)}[/yellow]" for w in c.warnings]
            status = "[green]ok[/green]" if c.ok else "[red]invalid[/red]"
            rows.append((c.name, status, "\n".join(notes) or "-"))
        title = f"{len(checks)} tasks in {directory}, {len(invalid)} invalid"
        print_rows(title, ("task", "status", "problems and warnings"), rows)
    if not checks:
        click.echo(f"error: no task folders in {directory}", err=True)
    if invalid or not checks:
        sys.exit(1)


@bench.command("gen")
@click.argument("family")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--count", type=click.IntRange(2), default=40, show_default=True, help="Tasks.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same tasks.")
@click.option(
    "--test-fraction",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.25,
    show_default=True,
    help="Share of the tasks held out in DIRECTORY/test.",
)
@reports_errors
def gen(family: str, directory: Path, count: int, seed: int, test_fraction: float) -> None:
    """Write COUNT generated Harbor tasks of FAMILY (shell-basics, write-number) into
    DIRECTORY/train and DIRECTORY/test: small shell tasks, each solved by one command its
    instruction names, for training an agent through the bash harness."""
    from rllm.benchmarks.harbor.generate import generate_family

    split = generate_family(family, count, directory, seed=seed, test_fraction=test_fraction)
    console.print(
        f"{family}: {len(split.train_names)} tasks in {split.train}, "
        f"{len(split.test_names)} held out in {split.test} (seed {seed})",
        markup=False,
    )
