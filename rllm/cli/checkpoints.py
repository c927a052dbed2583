"""``rllm-cli checkpoints ls|prune``: the training runs' checkpoints on disk
(``$RLLM_HOME/checkpoints/<run>/v<version>/``, or ``--dir``)."""

from __future__ import annotations

from pathlib import Path

import click

from rllm.cli.common import console, reports_errors

__all__ = ["checkpoints"]

_dir = click.option(
    "--dir",
    "root",
    type=click.Path(path_type=Path),
    default=None,
    help="Checkpoint root [env RLLM_CHECKPOINT_DIR, default $RLLM_HOME/checkpoints].",
)


def _root(root: Path | None) -> Path:
    if root is not None:
        return root
    from rllm.consumers.trainer.settings import TrainerSettings

    return TrainerSettings().checkpoint_dir


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def _served(serve_url: str) -> set[tuple[str, int]]:
    """The (run, version) the model server at ``serve_url`` serves; empty when it is down."""
    import httpx

    try:
        health = httpx.get(f"{serve_url.rstrip('/')}/health", timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return set()
    run, version = health.get("policy_run"), health.get("policy_version")
    return {(str(run), int(version))} if run and isinstance(version, int) else set()


@click.group()
def checkpoints() -> None:
    """List and prune the training runs' checkpoints (weights, optimiser state, offsets)."""


@checkpoints.command("ls")
@_dir
@reports_errors
def ls(root: Path | None) -> None:
    """Each run's checkpoints, the one LATEST names, and their size."""
    from rllm.consumers.trainer.checkpoint import list_checkpoints

    where = _root(root)
    runs = list_checkpoints(where)
    for run in runs:
        shown = ", ".join(f"v{v}{' (latest)' if v == run.latest else ''}" for v in run.versions)
        console.print(f"{run.run_id}  {shown}  {_mb(run.total_bytes)}", highlight=False)
    total = sum(r.total_bytes for r in runs)
    console.print(f"{len(runs)} run(s), {_mb(total)} in {where}", highlight=False)


@checkpoints.command()
@_dir
@click.option("--keep", type=int, default=1, show_default=True, help="Newest to keep per run.")
@click.option("--run", "run_id", default=None, help="Only this run.")
@click.option("--dry-run", is_flag=True, help="Say what would go; delete nothing.")
@click.option(
    "--serve-url",
    default="http://127.0.0.1:8000",
    show_default=True,
    help="A model server whose served policy is kept too (skipped when it is down).",
)
@reports_errors
def prune(root: Path | None, keep: int, run_id: str | None, dry_run: bool, serve_url: str) -> None:
    """Delete all but the newest --keep checkpoints of each run; never the one LATEST names
    (a restarted trainer resumes from it) nor the one the model server serves."""
    from rllm.consumers.trainer.checkpoint import prune_checkpoints

    where = _root(root)
    gone = prune_checkpoints(where, keep, run_id, protect=_served(serve_url), dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    for run, version, size in gone:
        console.print(f"{verb} {run} v{version} ({_mb(size)})", highlight=False)
    console.print(
        f"{verb} {len(gone)} checkpoint(s), {_mb(sum(g[2] for g in gone))} in {where}",
        highlight=False,
    )
