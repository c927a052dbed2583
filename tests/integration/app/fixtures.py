"""The whole loop's services in this process, for the tests that train through them (the
loop's and the viewer's): the local model server on a tiny random model, following
``rllm.policy-updates``; a real gateway in front of it; a real processors worker.

Loaded as a plugin (``tests/conftest.py``'s ``pytest_plugins``): ask for ``loop_stack`` and
call it; the stack stops at the test's end, or earlier with ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rllm.settings import KafkaSettings

if TYPE_CHECKING:  # imported when a test asks: torch would load for every test collected
    from rllm.app.demo import DemoConfig
    from rllm.serving.engine import Engine
    from rllm.serving.updates import PolicyFollower
    from tests.fakes.upstream import ThreadedServer
    from tests.integration.processors.helpers import Workers

__all__ = ["LoopStack", "loop_stack", "short_demo_config"]


@dataclass
class LoopStack:
    """The running services; ``gateway.url`` is what an ``AgentTrainer`` is pointed at."""

    engine: Engine
    follower: PolicyFollower
    server: ThreadedServer
    gateway: ThreadedServer
    workers: Workers
    closed: bool = field(default=False)

    def close(self) -> None:
        """Stop the workers, the gateway, the server and its follower (once)."""
        if self.closed:
            return
        self.closed = True
        self.workers.close()
        self.gateway.stop()
        self.server.stop()
        self.follower.stop()


@pytest.fixture
def loop_stack(
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    tiny_model: Path,
    tmp_path: Path,
) -> Iterator[Callable[..., LoopStack]]:
    """``loop_stack(admin_key, run_id=None)``: start the services (the server follows only
    ``run_id``'s policies when given, every run's otherwise) on the test's topics, created
    here with two partitions each."""
    make_topics(partitions=2)
    started: list[LoopStack] = []

    def start(admin_key: str, run_id: str | None = None) -> LoopStack:
        from rllm.models.loading import load_model
        from rllm.producers.gateway import GatewaySettings
        from rllm.producers.gateway import create_app as gateway_app
        from rllm.serving.app import create_app as serving_app
        from rllm.serving.engine import Engine
        from rllm.serving.updates import PolicyFollower
        from tests.fakes.upstream import ThreadedServer
        from tests.integration.processors.helpers import Workers

        engine = Engine(load_model(str(tiny_model)))
        follower = PolicyFollower(engine, kafka, run_id=run_id, poll_s=0.2).start()
        server = ThreadedServer(serving_app(engine, model_name="tiny"), lifespan="on")
        settings = GatewaySettings(
            upstream_url=server.url,
            spool_dir=tmp_path / "spool",
            spool_fsync=False,
            admin_key=admin_key,
        )
        gateway = ThreadedServer(gateway_app(settings, kafka), lifespan="on")
        workers = Workers(kafka, tmp_path)
        workers.start()
        started.append(LoopStack(engine, follower, server, gateway, workers))
        return started[-1]

    yield start
    for stack in started:
        stack.close()


def short_demo_config(
    run_id: str, gateway_url: str, tiny_model: Path, tmp_path: Path, **fields: object
) -> DemoConfig:
    """A two-update demo of the tiny model through ``gateway_url`` (``demo-admin-key``),
    keeping groups of uniform reward (the random model's are all 0); ``fields`` add or
    override."""
    from rllm.app.demo import DemoConfig

    defaults: dict[str, object] = {
        "admin_key": "demo-admin-key",
        "model": "tiny",
        "trainer_model": str(tiny_model),
        "max_updates": 2,
        "target_reward": 0,
        "group_size": 2,
        "max_tokens": 4,
        "lr": 0.05,
        "checkpoint_dir": tmp_path / "ckpt",
        "plot": tmp_path / "curve.png",
        "update_timeout_s": 120,
        "trainer": {"uniform_reward": "keep"},
    }
    return DemoConfig(run_id=run_id, gateway_url=gateway_url, **{**defaults, **fields})  # type: ignore[arg-type]  # each field checked by DemoConfig
