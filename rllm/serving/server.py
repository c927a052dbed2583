"""Run the local model server: load the model, follow policy updates, serve HTTP."""

from __future__ import annotations

from typing import Any

from rllm.models.runtime import start_runtime
from rllm.models.threads import compute
from rllm.serving.app import create_app
from rllm.serving.engine import Engine
from rllm.serving.settings import ServeSettings
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings

__all__ = ["build_engine", "serve"]


@compute
def build_engine(settings: ServeSettings) -> Engine:
    """Load the configured model (local files only) into an engine."""
    runtime = start_runtime(
        settings.model,
        settings.gguf_file,
        settings.device,
        settings.torch_threads,
        settings.serve_dtype,
    )
    return Engine(runtime.loaded, threads=runtime.threads)


def serve(
    settings: ServeSettings, kafka: KafkaSettings | None = None, **uvicorn_kwargs: Any
) -> None:
    """Serve until interrupted; follow rllm.policy-updates when ``kafka`` is given."""
    import uvicorn

    engine = build_engine(settings)
    follower = None
    if kafka is not None and settings.follow_updates:
        follower = PolicyFollower(engine, kafka, settings.follow_run_id).start()
    app = create_app(engine, settings.served_model_name, settings.max_batch, settings.batch_wait_ms)
    try:
        uvicorn.run(
            app,
            host=settings.serve_host,
            port=settings.serve_port,
            log_level="warning",
            **uvicorn_kwargs,
        )
    finally:
        if follower is not None:
            follower.stop()
