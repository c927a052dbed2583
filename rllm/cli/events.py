"""``rllm-cli events``: tail and decode any topic; publish a demo session."""

from __future__ import annotations

import json
from typing import Any

import click

from rllm.cli.common import console, kafka_options, kafka_settings, reports_errors

__all__ = ["events"]


@click.group()
def events() -> None:
    """Read and write events on the topics."""


@events.command()
@click.option(
    "--topic",
    "-t",
    default="rllm.session-events",
    show_default=True,
    help="Topic name (without prefix).",
)
@click.option("--from-beginning", is_flag=True, help="Start at the oldest record.")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new records.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--max", "max_records", type=int, default=None, help="Stop after N records.")
@kafka_options
@reports_errors
def tail(
    topic: str,
    from_beginning: bool,
    follow: bool,
    as_json: bool,
    max_records: int | None,
    bootstrap_servers: str | None,
    topic_prefix: str | None,
) -> None:
    """Decode and print events; corrupt records are reported with offset and reason."""
    from rllm.consumers.tail import tail_topic

    settings = kafka_settings(bootstrap_servers, topic_prefix)
    bad = shown = 0
    for rec in tail_topic(
        settings, topic, from_beginning=from_beginning, follow=follow, max_records=max_records
    ):
        bad += rec.event is None
        shown += 1
        if as_json:
            click.echo(json.dumps(rec.to_json()))
        elif rec.event is None:
            console.print(
                f"[red]{rec.partition}:{rec.offset}[/red] key={rec.key} undecodable: {rec.error}",
                markup=True,
            )
        else:
            ev = rec.to_json()["event"]
            kind = type(rec.event).__name__
            if kind == "SessionEvent":
                kind = ev["payload"]["type"]
            console.print(
                f"{rec.partition}:{rec.offset} key={rec.key} [bold]{kind}[/bold] {_summary(ev)}",
                markup=True,
            )
    if bad:
        click.echo(f"{bad} undecodable record(s)", err=True)
    if not shown and not from_beginning and not follow:
        click.echo(
            f"no new records on {settings.topic(topic)}: tail reads only records that arrive "
            f"while it runs; --from-beginning prints the ones already there, --follow waits",
            err=True,
        )


def _summary(ev: dict[str, Any]) -> str:
    payload = ev.get("payload")
    body: dict[str, Any] = payload if isinstance(payload, dict) else ev
    keep = ("step_index", "status", "reward", "task", "num_steps", "version", "reason")
    parts = [f"{k}={json.dumps(body[k])[:60]}" for k in keep if k in body]
    if "response_token_ids" in body:
        parts.append(f"tokens={len(body['prompt_token_ids'])}+{len(body['response_token_ids'])}")
    return " ".join(parts)


@events.command()
@click.option("--run-id", default="demo", show_default=True)
@kafka_options
@reports_errors
def demo(run_id: str, bootstrap_servers: str | None, topic_prefix: str | None) -> None:
    """Publish one demo session (open, three steps, a reward, close) and wait for the acks."""
    from rllm.kafka import EventPublisher
    from rllm.producers.demo import publish_demo_session

    with EventPublisher(kafka_settings(bootstrap_servers, topic_prefix)) as pub:
        session_id = publish_demo_session(pub, run_id=run_id)
    console.print(f"published demo session {session_id} (6 events) to rllm.session-events")
