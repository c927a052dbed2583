"""Steps the policy-following gateway tests share: publish a policy update, and run one
session's completion through the gateway."""

from __future__ import annotations

import uuid

import httpx

from rllm.kafka import EventPublisher
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN

__all__ = ["one_completion", "publish_policy"]


def publish_policy(kafka: KafkaSettings, version: int, uri: str) -> None:
    """Publish run ``r``'s policy ``version`` at checkpoint ``uri``."""
    update = PolicyUpdated(
        event_id=uuid.uuid4().hex, run_id="r", version=version, checkpoint_uri=uri
    )
    with EventPublisher(kafka) as pub:
        pub.publish_sync(POLICY_UPDATES, "r", update)


def one_completion(gw: ThreadedServer, sid: str, model: str, timeout_s: float) -> None:
    """Open session ``sid`` on the gateway and make one two-token completion in it."""
    info = httpx.post(f"{gw.url}/sessions", json={"session_id": sid}, headers=ADMIN).json()
    r = httpx.post(
        f"{info['base_url']}/completions",
        json={"model": model, "prompt": "abc", "max_tokens": 2},
        headers={"authorization": f"Bearer {info['api_key']}"},
        timeout=timeout_s,
    )
    assert r.status_code == 200, r.text
