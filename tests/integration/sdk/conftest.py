"""A real gateway (uvicorn thread) in front of the fake upstream, on this test's topics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rllm.producers.gateway import GatewaySettings, create_app
from rllm.settings import KafkaSettings
from tests.fakes.upstream import RunningUpstream, ThreadedServer, start_fake_upstream


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningUpstream]:
    server = start_fake_upstream()
    yield server
    server.stop()


@pytest.fixture
def gateway(
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    tmp_path: Path,
    upstream: RunningUpstream,
) -> Iterator[ThreadedServer]:
    make_topics(partitions=3)
    settings = GatewaySettings(
        upstream_url=upstream.url,
        spool_dir=tmp_path / "spool",
        spool_fsync=False,
        follow_policy_updates=False,
    )
    server = ThreadedServer(create_app(settings, kafka), lifespan="on")
    yield server
    server.stop()
