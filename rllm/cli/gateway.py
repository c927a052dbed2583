"""``rllm-cli gateway``: run the model gateway in front of an upstream model server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rllm.cli.common import (
    console,
    err_console,
    kafka_options,
    kafka_settings,
    listen_options,
    reports_errors,
)

__all__ = ["gateway"]


@click.command()
@listen_options("GATEWAY", 8400)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    envvar="RLLM_GATEWAY_UPSTREAM_URL",
    help="Model server base URL [http://127.0.0.1:8000]; repeat it for replicas of one model "
    "(a session sticks to one, new sessions go to the least loaded, one that fails is taken "
    "out and its sessions move).",
)
@click.option(
    "--upstream-kind",
    type=click.Choice(["vllm", "sglang", "hosted"]),
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_KIND",
    help="vllm, sglang or hosted [vllm].",
)
@click.option(
    "--tokenizer",
    default=None,
    envvar="RLLM_GATEWAY_TOKENIZER",
    help="Tokenizer (Hugging Face name or folder) of an sglang upstream's model, for its chat "
    "template; loaded at start.",
)
@click.option(
    "--upstream-timeout",
    "upstream_timeout_s",
    type=float,
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_TIMEOUT_S",
    help="Seconds an upstream call may take (between two chunks of a stream) before the agent "
    "gets a 504 [600].",
)
@click.option(
    "--upstream-streams/--no-upstream-streams",
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_STREAMS",
    help="Stream streamed calls upstream [on]; off for a model server that only answers whole "
    "(the local model server).",
)
@click.option(
    "--policy-sync",
    type=click.Choice(["local", "vllm", "sglang", "log"]),
    default=None,
    envvar="RLLM_GATEWAY_POLICY_SYNC",
    help="How a new policy gets served before steps carry it: local (our model server loads "
    "it itself), vllm (LoRA adapter loaded at runtime, or full weights in dev mode), sglang "
    "(update_weights_from_disk), log (hosted: what the log names) [by the upstream].",
)
@click.option(
    "--policy-weights",
    type=click.Choice(["auto", "lora", "full"]),
    default=None,
    envvar="RLLM_GATEWAY_POLICY_WEIGHTS",
    help="What a checkpoint holds [auto: lora when it has adapter_config.json].",
)
@click.option(
    "--upstream-checkpoint-dir",
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_CHECKPOINT_DIR",
    help="The trainer's checkpoint root as the model server sees it (it loads "
    "<dir>/<run_id>/v<version>) [the trainer's path].",
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
    help="Admin key [the key in --admin-key-file, generated on first start].",
)
@click.option(
    "--admin-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    envvar="RLLM_GATEWAY_ADMIN_KEY_FILE",
    help="Where the admin key is kept (0600) when --admin-key is not given "
    "[$RLLM_HOME/gateway/admin-key].",
)
@click.option(
    "--insecure",
    is_flag=True,
    default=None,
    envvar="RLLM_GATEWAY_INSECURE",
    help="No admin key: anyone may open, call, read and close any session.",
)
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    type=float,
    default=None,
    envvar="RLLM_GATEWAY_IDLE_TIMEOUT_S",
    help="Close a session without a call (and none in flight) for this many seconds with "
    "status timeout; 0: never [3600].",
)
@click.option(
    "--upstream-api-key",
    default=None,
    envvar="RLLM_GATEWAY_UPSTREAM_API_KEY",
    help="Key sent to a hosted upstream.",
)
@kafka_options
@reports_errors
def gateway(
    bootstrap_servers: str | None,
    topic_prefix: str | None,
    admin_key_file: Path | None,
    upstreams: tuple[str, ...],
    **flags: Any,
) -> None:
    """Serve OpenAI and Anthropic APIs per session, capturing every call to Kafka."""
    from rllm.infra.admin_key import admin_key_path, ensure_admin_key
    from rllm.producers.gateway import GatewaySettings, serve

    if len(upstreams) == 1:
        flags["upstream_url"] = upstreams[0]
    elif upstreams:
        flags["upstream_urls"] = upstreams

    settings = GatewaySettings(**{k: v for k, v in flags.items() if v is not None})
    if settings.admin_key is None and not settings.insecure:
        path = admin_key_file or admin_key_path()
        settings = GatewaySettings(
            **{k: v for k, v in flags.items() if v is not None}, admin_key=ensure_admin_key(path)
        )
        console.print(f"admin key in {path} (read by rllm-cli and the SDK)")
    elif settings.admin_key is None:
        err_console.print(
            "[red]warning:[/red] --insecure: no admin key, anyone who reaches the gateway may "
            "open, call, read and close any session"
        )
    kafka = kafka_settings(bootstrap_servers, topic_prefix)
    console.print(
        f"gateway on {settings.base_url} -> {settings.upstream_kind.value} "
        f"{' '.join(settings.replicas)} (capture={settings.capture.value}, "
        f"kafka={kafka.bootstrap_servers})"
    )
    serve(settings, kafka)
