"""Run the processors as a faust worker until stopped, a timeout, or (replays) idleness."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import uuid

import faust

from rllm.kafka import ensure_topics
from rllm.processors.app import Processors
from rllm.processors.settings import ProcessorSettings
from rllm.schemas.topics import DEAD_LETTERS, EPISODES, TRAJECTORIES, topic_spec
from rllm.settings import KafkaSettings

__all__ = ["app_id_for", "ensure_output_topics", "run_processors"]


def app_id_for(settings: ProcessorSettings, kafka: KafkaSettings) -> str:
    """The faust app id: prefixed; a replay gets a fresh one (own group, own state)."""
    base = kafka.topic(settings.app_id)
    if settings.replay:
        return f"{base}-replay-{settings.output_prefix.strip('.') or 'out'}-{uuid.uuid4().hex[:8]}"
    return base


def ensure_output_topics(
    settings: ProcessorSettings, kafka: KafkaSettings, partitions: int | None = None
) -> list[str]:
    """Create the output topics (under ``output_prefix``) when missing."""
    specs = [
        dataclasses.replace(topic_spec(n), name=settings.output_prefix + n)
        for n in (TRAJECTORIES, EPISODES, DEAD_LETTERS)
    ]
    return ensure_topics(kafka, specs, partitions=partitions)


def run_processors(
    settings: ProcessorSettings, kafka: KafkaSettings, idle_exit_s: float | None = None
) -> None:
    """Run the worker in this process (blocks; faust owns the event loop and signals).

    Args:
        settings: processor settings (``timeout_s`` stops the worker after that long).
        kafka: where Kafka is.
        idle_exit_s: stop once no record arrived for this long (replays end this way).
    """
    ensure_output_topics(settings, kafka)
    procs = Processors(settings, kafka, app_id=app_id_for(settings, kafka))
    procs.declare_internal_topics()
    started = time.monotonic()

    @procs.app.timer(0.5)  # type: ignore[untyped-decorator]  # faust: untyped
    async def _stop_when_done() -> None:
        now = time.monotonic()
        over = settings.timeout_s is not None and now - started >= settings.timeout_s
        idle = idle_exit_s is not None and now - procs.last_activity >= idle_exit_s
        if over or idle:
            os.kill(os.getpid(), signal.SIGTERM)

    worker = faust.Worker(
        procs.app, loglevel=settings.log_level, redirect_stdouts=False, quiet=True
    )
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        procs.close()
