"""``rllm-cli harness list|install``: the registered harnesses (name, pinned version, the
API it speaks, installed or not) and installing one ahead of its first run.

Installs go under ``$RLLM_HARNESS_HOME`` (default ``$RLLM_HOME/harnesses``). A harness
without a host install of its own (the built-ins: their install script, if any, runs once
in the sandbox snapshot) counts as installed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import console, print_rows, reports_errors

__all__ = ["harness", "harness_home", "harness_row"]


def harness_home() -> Path:
    """Where harnesses are installed on the host: the harness layer's ``harnesses_home()``
    (``$RLLM_HARNESS_HOME``) where it has one, else ``$RLLM_HOME/harnesses``."""
    import importlib

    from rllm.settings import default_home

    try:
        home = importlib.import_module("rllm.producers.harnesses.host").harnesses_home
    except (ImportError, AttributeError):
        return default_home() / "harnesses"
    found: Path = home()
    return found


def harness_row(name: str, home: Path) -> dict[str, Any]:
    """One harness's line: name, version, api, installed (and why not, when it fails to
    load)."""
    from rllm.producers.harnesses import get_harness
    from rllm.producers.harnesses.host import is_installed

    try:
        made = get_harness(name)
    except Exception as exc:  # a third-party module whose dependency is missing
        error = f"{type(exc).__name__}: {exc}"
        return {"name": name, "version": "?", "api": "?", "installed": False, "error": error}
    installed = is_installed(made, home)
    return {
        "name": made.name,
        "version": made.version,
        "api": str(made.api),
        "installed": installed,
        "error": None,
    }


@click.group()
def harness() -> None:
    """Command-line agents that run Harbor tasks: list them, install one ahead."""


@harness.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
def list_command(as_json: bool) -> None:
    """Every registered harness: name, pinned version, API, installed or not."""
    from rllm.producers.harnesses import harness_names

    home = harness_home()
    rows = [harness_row(name, home) for name in harness_names()]
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    shown = []
    for row in rows:
        state = "yes" if row["installed"] else f"no{': ' + row['error'] if row['error'] else ''}"
        shown.append((row["name"], row["version"], row["api"], state))
    title = f"{len(rows)} harnesses (installs in {home})"
    print_rows(title, ("name", "version", "api", "installed"), shown)


@harness.command("install")
@click.argument("name")
@reports_errors
def install_command(name: str) -> None:
    """Install harness NAME on the host, under $RLLM_HARNESS_HOME (default
    $RLLM_HOME/harnesses); idempotent."""
    from rllm.producers.harnesses import get_harness
    from rllm.producers.harnesses.types import InstallsOnHost

    made = get_harness(name)
    home = harness_home()
    if not isinstance(made, InstallsOnHost):
        console.print(
            f"harness {made.name!r} {made.version} needs no host install: its install "
            f"script, if any, runs once in the sandbox snapshot of its first task"
        )
        return
    home.mkdir(parents=True, exist_ok=True)
    asyncio.run(made.install(home))
    console.print(f"installed harness {made.name!r} {made.version} in {home}")
