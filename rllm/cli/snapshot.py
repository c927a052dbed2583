"""``rllm-cli sandbox snapshot create|list|delete|prune``: sandboxes frozen after their
setup, for later sandboxes to start from."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import click

from rllm.cli.backends import age, backend_option, with_backend
from rllm.cli.common import console, print_rows, reports_errors

__all__ = ["snapshot"]


@click.group()
def snapshot() -> None:
    """Snapshots: a sandbox after its setup, frozen for later sandboxes to start from."""


@snapshot.command("create")
@backend_option
@click.argument("name")
@click.option("--image", default="debian:bookworm", show_default=True)
@click.option("--setup", default=None, help="Shell command to run before freezing.")
@click.option(
    "--network",
    type=click.Choice(["none", "host"]),
    default="none",
    show_default=True,
    help="Network of the setup (host: installs).",
)
@reports_errors
def snapshot_create(
    backend: str | None, name: str, image: str, setup: str | None, network: str
) -> None:
    """Create snapshot NAME from IMAGE after SETUP (reused while the same recipe is valid)."""
    from rllm.sandboxes import NetworkMode, SandboxSpec
    from rllm.sandboxes.ops import snapshot_after

    spec = SandboxSpec(image=image, network=NetworkMode(network))
    info = with_backend(backend, lambda b: snapshot_after(b, spec, name, setup))
    verb = "created" if info.name == name else f"reused {info.name} for"
    console.print(f"{verb} snapshot {name}: start from it with --image {info.image}")


@snapshot.command("list")
@backend_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def snapshot_list(backend: str | None, as_json: bool) -> None:
    """Snapshots of a backend with their age and TTL."""
    infos = with_backend(backend, lambda b: b.snapshots.all())
    if as_json:
        rows = [{**dataclasses.asdict(i), "expired": i.expired} for i in infos]
        click.echo(json.dumps(rows, indent=2, default=dict))
        return
    columns = ("name", "backend", "image", "key", "age", "ttl", "expired")
    shown = [
        (
            i.name,
            i.backend,
            i.image,
            i.key or "-",
            age(time.time() - i.created_at),
            age(i.ttl_s) if i.ttl_s else "-",
            "yes" if i.expired else "no",
        )
        for i in infos
    ]
    print_rows(f"{len(infos)} snapshots", columns, shown)


@snapshot.command("delete")
@backend_option
@click.argument("name")
@reports_errors
def snapshot_delete(backend: str | None, name: str) -> None:
    """Delete snapshot NAME."""
    with_backend(backend, lambda b: b.snapshots.delete(name))
    console.print(f"deleted snapshot {name}")


@snapshot.command("prune")
@backend_option
@reports_errors
def snapshot_prune(backend: str | None) -> None:
    """Delete every snapshot past its TTL (RLLM_SANDBOX_SNAPSHOT_TTL_S)."""

    async def prune(b: Any) -> list[str]:
        expired = [i.name for i in await b.snapshots.all() if i.expired]
        for name in expired:
            await b.snapshots.delete(name)
        return expired

    pruned = with_backend(backend, prune)
    console.print(f"pruned {len(pruned)} expired snapshot(s)" + "".join(f"\n  {n}" for n in pruned))
