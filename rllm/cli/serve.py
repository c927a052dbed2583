"""``rllm-cli serve``: the local OpenAI-compatible model server."""

from __future__ import annotations

from typing import Any

import click

from rllm.cli.common import kafka_options, kafka_settings, reports_errors

__all__ = ["serve"]


@click.command()
@click.option("--model", default=None, help="Local HF model dir or .gguf file (RLLM_SERVE_MODEL).")
@click.option("--host", "serve_host", default=None, help="Listen address [127.0.0.1].")
@click.option(
    "--port", "serve_port", type=int, default=None, help="Listen port [8000; RLLM_SERVE_PORT]."
)
@click.option("--served-model-name", default=None, help="Name in /v1/models [local].")
@click.option("--max-batch", type=int, default=None, help="Sequences per batch [32].")
@click.option(
    "--dtype",
    "serve_dtype",
    type=click.Choice(["float32", "bfloat16"]),
    default=None,
    help="Generation arithmetic [float32; env RLLM_SERVE_DTYPE].",
)
@click.option("--follow-run-id", default=None, help="Only follow this training run.")
@click.option("--no-follow", is_flag=True, help="Do not reload on PolicyUpdated.")
@kafka_options
@reports_errors
def serve(
    bootstrap_servers: str | None, topic_prefix: str | None, no_follow: bool, **flags: Any
) -> None:
    """Serve chat/completions and completions with vLLM-style token IDs and logprobs."""
    from rllm.serving.server import serve as run
    from rllm.serving.settings import ServeSettings

    overrides = {k: v for k, v in flags.items() if v is not None}
    if no_follow:
        overrides["follow_updates"] = False
    settings = ServeSettings(**overrides)
    kafka = None if no_follow else kafka_settings(bootstrap_servers, topic_prefix)
    run(settings, kafka)
