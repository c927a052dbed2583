"""``rllm-cli up``, ``down`` and ``status``: the local stack."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rllm.cli.common import console, err_console, kafka_options, kafka_settings, reports_errors

__all__ = ["down", "stack_settings", "status", "topics", "up"]


def stack_settings(**overrides: Any) -> Any:
    """``StackSettings`` with each service's port read from that service's own settings
    (``RLLM_GATEWAY_PORT``, ``RLLM_SERVE_PORT``, ``RLLM_VIEW_PORT``) unless given."""
    from rllm.consumers.viewer.settings import ViewerSettings
    from rllm.producers.gateway.settings import GatewaySettings
    from rllm.serving.settings import ServeSettings
    from rllm.settings import StackSettings

    ports: dict[str, Callable[[], int]] = {
        "gateway_port": lambda: GatewaySettings().port,
        # model given: RLLM_MODEL (the stack's profile) is not a server model gone unread
        "serve_port": lambda: ServeSettings(model="").serve_port,
        "view_port": lambda: ViewerSettings().port,
    }
    for name, read in ports.items():
        if overrides.get(name) is None:
            overrides[name] = read()
    return StackSettings(**overrides)


def _stack(home: Path | None, port: int | None, partitions: int | None = None, **more: Any) -> Any:
    overrides: dict[str, Any] = {k: v for k, v in more.items() if v is not None}
    if home is not None:
        overrides["home"] = home
    if port is not None:
        overrides["kafka_port"] = port
    if partitions is not None:
        overrides["partitions"] = partitions
    return stack_settings(**overrides)


_home = click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="Data directory of the stack [env RLLM_HOME, default ~/.rllm].",
)
_port = click.option(
    "--kafka-port",
    type=int,
    default=None,
    help="Port of the local broker [env RLLM_KAFKA_PORT, default 9092].",
)


def _print(statuses: Any) -> None:
    """One aligned row per component: up/down, name, address, detail (names and addresses
    padded to the longest, so ``processors`` lines up with ``kafka``)."""
    statuses = list(statuses)
    name_w = max((len(s.name) for s in statuses), default=0)
    addr_w = max((len(s.address) for s in statuses), default=0)
    for s in statuses:
        mark = "[green]up[/green]  " if s.running else "[red]down[/red]"
        console.print(f"{mark} {s.name:<{name_w}} {s.address:<{addr_w}} {s.detail}".rstrip())


@click.command()
@_home
@_port
@click.option("--partitions", type=int, default=None, help="Partitions per event topic [3].")
@click.option(
    "--brokers",
    type=click.IntRange(1, 9),
    default=None,
    help="Kafka brokers: 1, or 3 for a local cluster (3 replicas of every topic, 2 in sync; "
    "node i on --kafka-port + 2(i-1)) [env RLLM_KAFKA_BROKERS; default what the last up "
    "started, else 1].",
)
@click.option(
    "--services",
    default=None,
    help="Services besides Kafka [serve,gateway,processors,history,view]; '' for none.",
)
@click.option(
    "--model",
    "-m",
    default=None,
    help="Model profile the gateway forwards to [active profile, else local].",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Start the gateway without an admin key: anyone may open, call, read and close "
    "any session.",
)
@reports_errors
def up(
    home: Path | None,
    kafka_port: int | None,
    partitions: int | None,
    brokers: int | None,
    services: str | None,
    model: str | None,
    insecure: bool,
) -> None:
    """Start the local stack (Kafka in KRaft mode, topics, model server, gateway, processors,
    history, its viewer) and say where each piece listens."""
    from rllm.infra.admin_key import admin_key_path
    from rllm.infra.stack import stack_up

    stack = _stack(
        home, kafka_port, partitions, services=services, model=model, kafka_brokers=brokers
    )
    console.print(f"starting the local stack in {stack.home} ...")
    if insecure:
        err_console.print(
            "[red]warning:[/red] --insecure: the gateway runs without an admin key; anyone "
            "who reaches it may open, call, read and close any session"
        )
    _print(stack_up(stack, say=console.print, insecure=insecure))
    console.print(f"export RLLM_BOOTSTRAP_SERVERS={stack.bootstrap_servers}")
    if stack.replication_factor > 1:
        console.print(f"export RLLM_REPLICATION_FACTOR={stack.replication_factor}")
    console.print(f"export RLLM_GATEWAY_URL=http://127.0.0.1:{stack.gateway_port}")
    if not insecure:
        console.print(
            f"gateway admin key in {admin_key_path(stack.home)} (0600; rllm-cli and the SDK "
            "read it, RLLM_ADMIN_KEY overrides it)"
        )


@click.command()
@_home
@_port
@click.option("--purge", is_flag=True, help="Also delete the broker's data.")
@reports_errors
def down(home: Path | None, kafka_port: int | None, purge: bool) -> None:
    """Stop everything ``up`` started."""
    from rllm.infra.stack import stack_down

    stack = _stack(home, kafka_port)
    stack_down(stack, purge=purge)
    console.print("stopped" + (" and purged" if purge else ""))


@click.command()
@_home
@_port
@reports_errors
def status(home: Path | None, kafka_port: int | None) -> None:
    """What runs and where it listens; exit status 1 when something is down."""
    from rllm.infra.stack import stack_status

    statuses = stack_status(_stack(home, kafka_port))
    _print(statuses)
    if not all(s.running for s in statuses):
        raise SystemExit(1)


@click.group()
def topics() -> None:
    """Create and list the design's topics on any broker."""


@topics.command("create")
@click.option("--partitions", type=int, default=None, help="Partitions per event topic.")
@kafka_options
@reports_errors
def topics_create(
    partitions: int | None, bootstrap_servers: str | None, topic_prefix: str | None
) -> None:
    """Create every topic that does not exist yet (zstd, 16 MiB messages, kept forever)."""
    from rllm.kafka import ensure_topics

    settings = kafka_settings(bootstrap_servers, topic_prefix)
    created = ensure_topics(settings, partitions=partitions)
    console.print(f"created {', '.join(created)}" if created else "all topics exist")


@topics.command("list")
@kafka_options
@reports_errors
def topics_list(bootstrap_servers: str | None, topic_prefix: str | None) -> None:
    """The design's topics: name, key, record, and whether the broker has them (with their
    partitions and end offsets: the records written, transaction markers included)."""
    from rllm.kafka import end_offsets, list_topics
    from rllm.schemas.topics import TOPICS

    settings = kafka_settings(bootstrap_servers, topic_prefix)
    held = list_topics(settings)
    for spec in TOPICS:
        name = settings.topic(spec.name)
        parts = held.get(name, 0)
        if parts:
            ends = sum(end_offsets(settings, name).values())
            state = f"{parts} partitions, {ends:,} records"
        else:
            state = "[red]missing[/red]"
        console.print(f"{name:<32} key={spec.key:<16} {spec.record:<34} {state}")
