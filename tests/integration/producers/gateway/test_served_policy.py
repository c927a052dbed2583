"""The served policy is the one the steps say (issue 18 item 6): when the local model server
cannot load a checkpoint that ``rllm.policy-updates`` names, the gateway keeps stamping the
version the server reports serving; once the server loads one, the gateway takes it.
``/health`` shows both: what the server serves (``policy_version``) and what the log names
(``announced_policy_version``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.schemas.types import SessionOpened, StepCaptured
from rllm.serving.app import create_app as serving_app
from rllm.serving.engine import Engine
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import until
from tests.integration.producers.gateway.fixtures import ADMIN, Events
from tests.integration.producers.gateway.policy_steps import one_completion, publish_policy


@pytest.fixture
def model_server(
    kafka: KafkaSettings, tmp_path: Path
) -> Iterator[tuple[ThreadedServer, PolicyFollower]]:
    """The local model server (a tiny random model) following the test's policy topic."""
    engine = Engine(load_model(str(tiny_model_dir(tmp_path / "tiny"))))
    follower = PolicyFollower(engine, kafka, poll_s=0.2).start()
    server = ThreadedServer(serving_app(engine, model_name="tiny"), lifespan="on")
    yield server, follower
    server.stop()
    follower.stop()


def _publish(kafka: KafkaSettings, version: int, uri: str) -> None:
    publish_policy(kafka, version, uri)


def _rollout(gw: ThreadedServer, sid: str) -> None:
    one_completion(gw, sid, model="tiny", timeout_s=60)


def _stamps(session_events: Events, sid: str) -> list[int]:
    """SessionOpened's policy version, then each step's."""
    payloads: list[Any] = [e.payload for k, e in session_events() if k == sid]
    return [p.policy_version for p in payloads if isinstance(p, SessionOpened | StepCaptured)]


def test_a_checkpoint_the_server_cannot_load_is_never_adopted(
    start_gateway: Callable[..., ThreadedServer],
    model_server: tuple[ThreadedServer, PolicyFollower],
    kafka: KafkaSettings,
    session_events: Events,
    tmp_path: Path,
) -> None:
    server, follower = model_server
    gw = start_gateway(upstream_url=server.url, follow_policy_updates=True)
    (tmp_path / "empty").mkdir()
    _publish(kafka, 36, (tmp_path / "empty").as_uri())
    until("the server never tried the checkpoint", lambda: bool(follower.errors))
    assert "has no *.safetensors weights" in follower.errors[0]
    policy = lambda: httpx.get(f"{gw.url}/admin/policy", headers=ADMIN).json()  # noqa: E731
    until("the gateway never read the update", lambda: policy()["announced_policy_version"] == 36)
    health = httpx.get(f"{gw.url}/health").json()
    assert (health["policy_version"], health["policy_run"]) == (0, ""), "what the server serves"
    assert (health["announced_policy_version"], health["announced_policy_run"]) == (36, "r")
    now = policy()
    assert (now["policy_version"], now["policy_run"]) == (0, "")
    assert (now["upstream_policy_version"], now["upstream_policy_run"]) == (0, "")
    _rollout(gw, "before")
    assert _stamps(session_events, "before") == [0, 0]

    load_model(str(tiny_model_dir(tmp_path / "tiny"))).model.save_pretrained(tmp_path / "v37")
    _publish(kafka, 37, (tmp_path / "v37").as_uri())
    until(
        "the gateway never took v37",
        lambda: httpx.get(f"{gw.url}/health").json()["policy_version"] == 37,
    )
    assert (policy()["policy_run"], policy()["upstream_policy_version"]) == ("r", 37)
    health = httpx.get(f"{gw.url}/health").json()
    assert (health["policy_run"], health["announced_policy_version"]) == ("r", 37)
    _rollout(gw, "after")
    assert _stamps(session_events, "after") == [37, 37]
