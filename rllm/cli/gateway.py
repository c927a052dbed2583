"""``rllm-cli gateway``: run the model gateway in front of an upstream model server."""

from __future__ import annotations

from typing import Any

import click

from rllm.cli.common import console, kafka_options, kafka_settings, reports_errors

__all__ = ["gateway"]


@click.command()
@click.option("--host", default=None, envvar="RLLM_GATEWAY_HOST", help="Interface [127.0.0.1].")
@click.option("--port", type=int, default=None, envvar="RLLM_GATEWAY_PORT", help="Port [8400].")
@click.option(
    "--upstream",
    "upstream_url",
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_URL",
    help="Model server base URL [http://127.0.0.1:8000].",
)
@click.option(
    "--upstream-kind",
    type=click.Choice(["vllm", "sglang", "hosted"]),
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_KIND",
    help="vllm, sglang or hosted [vllm].",
)
@click.option(
    "--capture",
    type=click.Choice(["ack", "async"]),
    default=None,
    envvar="RLLM_GATEWAY_CAPTURE",
    help="ack: answer after Kafka's ack; async: answer at once [ack].",
)
@click.option(
    "--spool-dir",
    type=click.Path(file_okay=False),
    default=None,
    envvar="RLLM_GATEWAY_SPOOL_DIR",
    help="Spool while Kafka is away [~/.rllm/gateway-spool].",
)
@click.option(
    "--admin-key",
    default=None,
    envvar="RLLM_GATEWAY_ADMIN_KEY",
    help="Admin key (without one the gateway is open).",
)
@click.option(
    "--upstream-api-key",
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_API_KEY",
    help="Key sent to a hosted upstream.",
)
@kafka_options
@reports_errors
def gateway(bootstrap_servers: str | None, topic_prefix: str | None, **flags: Any) -> None:
    """Serve OpenAI and Anthropic APIs per session, capturing every call to Kafka."""
    from rllm.producers.gateway import GatewaySettings, serve

    settings = GatewaySettings(**{k: v for k, v in flags.items() if v is not None})
    kafka = kafka_settings(bootstrap_servers, topic_prefix)
    console.print(
        f"gateway on {settings.base_url} -> {settings.upstream_kind.value} "
        f"{settings.upstream_url} (capture={settings.capture.value}, "
        f"kafka={kafka.bootstrap_servers})"
    )
    serve(settings, kafka)
