"""Session-wide real Kafka broker for integration tests, and per-test topics.

The broker comes from, in order: ``RLLM_TEST_BOOTSTRAP`` (a running broker, e.g. the one
``.ci/run`` started from ``infra/``); ``RLLM_TEST_KAFKA=testcontainers`` (a Kafka container,
where a Docker engine exists); otherwise ``infra/kafka/start`` on a free port in a
temporary directory, stopped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rllm.settings import KafkaSettings
from tests.ports import free_broker_port

pytest_plugins = [
    "tests.integration.producers.gateway.fixtures",
    "tests.integration.app.fixtures",
    "tests.integration.sandboxes.fixtures",
    "tests.integration.sandboxes.docker_fixtures",
    "tests.integration.sandboxes.registry_fixtures",
]
"""Fixtures shared across folders (the gateway's by the harness and SDK tests, the
sandboxes' by the harness tests, the loop's services by the loop and viewer tests), loaded
as plugins rather than imported from a conftest."""

collect_ignore = ["verl"]
"""tests/verl needs verl, which lives in a venv of its own: `make test-verl` runs it there."""


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a real Kafka broker for the whole test session."""
    if os.environ.get("RLLM_TEST_BOOTSTRAP"):
        yield os.environ["RLLM_TEST_BOOTSTRAP"]
        return
    if os.environ.get("RLLM_TEST_KAFKA") == "testcontainers":
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    from rllm.infra.broker import LocalBroker

    broker = LocalBroker(free_broker_port(), Path(tmp_path_factory.mktemp("kafka")))
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop(purge=True)


@pytest.fixture
def kafka(kafka_bootstrap: str) -> KafkaSettings:
    """Settings for this test: the session broker and a topic prefix of its own."""
    return KafkaSettings(
        bootstrap_servers=kafka_bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}."
    )


@pytest.fixture
def make_topics(kafka: KafkaSettings) -> Callable[..., list[str]]:
    """Create this test's own copies of the design's topics; return their full names."""
    from rllm.kafka import ensure_topics
    from rllm.schemas.topics import TOPICS

    def create(partitions: int | None = None) -> list[str]:
        ensure_topics(kafka, TOPICS, partitions=partitions)
        return [kafka.topic(s.name) for s in TOPICS]

    return create


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With ``RLLM_TEST_NO_SKIP=1`` (``.ci/run`` sets it) a skipped test fails instead:
    CI installs and starts every service the tests need, so a skip there hides a defect."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]  # pluggy sends the hook's Result into the yield
    if (
        os.environ.get("RLLM_TEST_NO_SKIP") == "1"
        and report.skipped
        and not hasattr(report, "wasxfail")
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be skipped: {reason}"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with a char-level tokenizer (an HF directory), made once."""
    from rllm.models.tiny import tiny_model_dir

    return tiny_model_dir(tmp_path_factory.mktemp("tiny-model"))
