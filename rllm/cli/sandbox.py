"""``rllm-cli sandbox run|ls|reap|image|snapshot``: sandboxes by hand."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import click

from rllm.cli.backends import age, backend_option, with_backend
from rllm.cli.common import (
    console,
    err_console,
    image_substitute_option,
    image_substitutes,
    print_rows,
    reports_errors,
)
from rllm.cli.snapshot import snapshot

__all__ = ["sandbox"]

T = TypeVar("T")


def _pairs(values: tuple[str, ...], flag: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=flag)
        out[key] = val
    return out


@click.group()
def sandbox() -> None:
    """Sandboxes: run a command in one, list and reap them, build images, snapshots."""


@sandbox.command(context_settings={"ignore_unknown_options": True})
@backend_option
@click.option("--image", default="debian:bookworm", show_default=True, help="Image or rootfs dir.")
@click.option(
    "--network",
    type=click.Choice(["none", "gateway", "host"]),
    default="none",
    show_default=True,
    help="What the sandbox can reach.",
)
@click.option(
    "--gateway-url",
    default=None,
    envvar="RLLM_GATEWAY_URL",
    help="With --network gateway: the gateway's URL on the host.",
)
@click.option("--memory-mb", type=int, default=None, help="Memory limit.")
@click.option("--cpus", type=float, default=None, help="CPU limit (1.0 = a core).")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds per command.")
@click.option("--workdir", default="/workspace", show_default=True)
@click.option("--env", "-e", "env", multiple=True, help="KEY=VALUE (repeatable).")
@click.option("--owner", default=None, help="Owner label (a run id) for ls and reap.")
@image_substitute_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@reports_errors
def run(
    backend: str | None,
    image: str,
    network: str,
    gateway_url: str | None,
    memory_mb: int | None,
    cpus: float | None,
    timeout_s: float | None,
    workdir: str,
    env: tuple[str, ...],
    owner: str | None,
    image_substitute: tuple[str, ...],
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in a fresh sandbox and print its output (exit status: the command's).

    Without COMMAND: a shell for humans, one line at a time in one sandbox (cd carries
    over; end with Ctrl-D or `exit`).
    """
    from rllm.sandboxes import OWNER_LABEL, NetworkMode, SandboxSpec
    from rllm.sandboxes.ops import run_once, shell_line

    spec = SandboxSpec(
        image=image,
        network=NetworkMode(network),
        gateway_url=gateway_url,
        memory_mb=memory_mb,
        cpus=cpus,
        workdir=workdir,
        env=_pairs(env, "--env"),
        labels={OWNER_LABEL: owner} if owner else {},
    )
    argv = list(command[1:] if command[:1] == ("--",) else command)
    substitutes = image_substitutes(image_substitute)

    if argv:
        cmd: str | list[str] = argv[0] if len(argv) == 1 and " " in argv[0] else argv
        result = with_backend(backend, lambda b: run_once(b, spec, cmd, timeout_s), substitutes)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.error:
            err_console.print(f"[yellow]{result.error}[/yellow]")
        sys.exit(result.exit_code if result.exit_code is not None else 124)

    async def shell(b: Any) -> int:
        box = await b.create(spec)
        err_console.print(f"sandbox {box.id} ({b.name}, {image}); Ctrl-D to leave")
        cwd, code = workdir, 0
        try:
            while True:
                err_console.print(f"[bold]{cwd}[/bold] $ ", end="")
                line = await asyncio.to_thread(sys.stdin.readline)
                if not line or line.strip() == "exit":
                    return code
                if not line.strip():
                    continue
                result, cwd = await shell_line(box, line.rstrip("\n"), cwd, timeout_s)
                sys.stdout.write(result.stdout)
                sys.stderr.write(result.stderr)
                sys.stdout.flush()
                code = result.exit_code if result.exit_code is not None else 124
        finally:
            await box.close()

    sys.exit(with_backend(backend, shell, substitutes))


@sandbox.command("ls")
@backend_option
@click.option("--owner", default=None, help="Only this owner's sandboxes.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def ls(backend: str | None, owner: str | None, as_json: bool) -> None:
    """Sandboxes of a backend, with their owner label and age."""
    from rllm.sandboxes import OWNER_LABEL

    infos = with_backend(backend, lambda b: b.sandboxes({OWNER_LABEL: owner} if owner else None))
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": i.id,
                        "backend": i.backend,
                        "image": i.image,
                        "labels": dict(i.labels),
                        "created_at": i.created_at,
                        "age_s": round(i.age_s, 1),
                        "alive": i.alive,
                    }
                    for i in infos
                ],
                indent=2,
            )
        )
        return
    columns = ("id", "backend", "image", "owner", "age", "alive")
    rows = []
    for i in infos:
        owner, alive = i.labels.get(OWNER_LABEL, "-"), "yes" if i.alive else "no"
        rows.append((i.id, i.backend, i.image, owner, age(i.age_s), alive))
    print_rows(f"{len(infos)} sandboxes", columns, rows)


@sandbox.command()
@backend_option
@click.option("--owner", default=None, help="Only this owner's sandboxes.")
@click.option("--label", "labels", multiple=True, help="KEY=VALUE a sandbox must carry.")
@click.option("--older-than", default=None, help="Only those older than this (90s, 15m, 2h).")
@reports_errors
def reap(
    backend: str | None, owner: str | None, labels: tuple[str, ...], older_than: str | None
) -> None:
    """Close leaked sandboxes (by owner, labels and age), including dead processes' ones."""
    from rllm.sandboxes import OWNER_LABEL
    from rllm.sandboxes.ops import parse_duration

    wanted = _pairs(labels, "--label")
    if owner:
        wanted[OWNER_LABEL] = owner
    age = parse_duration(older_than) if older_than else None
    reaped = with_backend(backend, lambda b: b.reap(wanted or None, age))
    console.print(
        f"reaped {len(reaped)} sandbox(es)" + (": " + ", ".join(reaped) if reaped else "")
    )


@sandbox.group()
def image() -> None:
    """Images: build a Dockerfile, list, import a root filesystem."""


@image.command("build")
@backend_option
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--name", default=None, help="Image name [default: from the content hash].")
@image_substitute_option
@reports_errors
def image_build(
    backend: str | None, directory: Path, name: str | None, image_substitute: tuple[str, ...]
) -> None:
    """Build DIRECTORY/Dockerfile (DIRECTORY is the build context), each step cached."""
    started = time.monotonic()
    substitutes = image_substitutes(image_substitute)
    info = with_backend(backend, lambda b: b.build_image(directory, name), substitutes)
    console.print(
        f"built {info.name} ({info.backend}, id {info.id}) in {time.monotonic() - started:.1f} s"
    )


@image.command("ls")
@backend_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def image_ls(backend: str | None, as_json: bool) -> None:
    """Images a backend can create sandboxes from."""
    infos = with_backend(backend, lambda b: b.images())
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(i) for i in infos], indent=2))
        return
    rows = []
    for i in infos:
        size = f"{i.size_bytes / 1e6:.0f} MB" if i.size_bytes is not None else "-"
        created = age(time.time() - i.created_at) + " ago" if i.created_at else "-"
        rows.append((i.name, i.backend, i.id, size, created))
    print_rows(f"{len(infos)} images", ("name", "backend", "id", "size", "created"), rows)


@image.command("pull")
@click.argument("name")
@click.option(
    "--mirror",
    default=None,
    envvar="RLLM_REGISTRY_MIRROR",
    help="Registry that Docker Hub names are pulled through (host[:port] or http://host:port).",
)
@reports_errors
def image_pull(name: str, mirror: str | None) -> None:
    """Pull image NAME (any reference Docker understands) into the local image store."""
    from rllm.sandboxes import SandboxSettings
    from rllm.sandboxes.images.pull import pull_image
    from rllm.sandboxes.images.store import ImageStore

    started = time.monotonic()
    update = {"registry_mirror": mirror} if mirror else {}
    settings = SandboxSettings().model_copy(update=update)
    pulled = pull_image(ImageStore(settings.images_dir), name, settings)
    console.print(
        f"pulled {pulled.name} (id {pulled.id}, {len(pulled.layers)} layers) "
        f"in {time.monotonic() - started:.1f} s"
    )


@image.command("import")
@click.argument("name")
@click.argument("rootfs", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@reports_errors
def image_import(name: str, rootfs: Path) -> None:
    """Import a root filesystem tarball (e.g. from `docker export`) as image NAME."""
    from rllm.sandboxes import SandboxSettings
    from rllm.sandboxes.images.importer import import_rootfs
    from rllm.sandboxes.images.store import ImageStore

    imported = import_rootfs(ImageStore(SandboxSettings().images_dir), name, rootfs)
    console.print(f"imported {imported.name} (id {imported.id}) from {rootfs}")


sandbox.add_command(snapshot)
