"""Keys, bad input, pause mode, policy versions (endpoint and topic), metrics, ingest."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from rllm.kafka import EventPublisher
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import to_json_dict
from rllm.schemas.policy import PolicyServed, PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import SessionClosed, SessionEvent, SessionStatus, StepCaptured
from rllm.settings import KafkaSettings
from tests.fakes.upstream import RunningUpstream, ThreadedServer
from tests.integration.helpers import read_all
from tests.integration.producers.gateway.fixtures import ADMIN as DEFAULT_ADMIN
from tests.integration.producers.gateway.fixtures import Events
from tests.samples import session_events as sample_session_events

ADMIN = {"authorization": "Bearer admin-secret"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
CODEC = AvroCodec()


def test_keys_and_bad_input_get_clear_4xx(
    start_gateway: Callable[..., ThreadedServer], caplog: pytest.LogCaptureFixture
) -> None:
    gw = start_gateway(admin_key="admin-secret", max_body_bytes=4096)
    url = gw.url
    assert httpx.post(f"{url}/sessions", json={}).status_code == 401
    assert httpx.post(f"{url}/sessions", json={}, headers={"x-api-key": "wrong"}).status_code == 401
    a = httpx.post(f"{url}/sessions", json={"session_id": "a"}, headers=ADMIN).json()
    b = httpx.post(f"{url}/sessions", json={"session_id": "b"}, headers=ADMIN).json()
    assert httpx.post(f"{url}/sessions", json={"session_id": "a"}, headers=ADMIN).status_code == 409
    # a session key does not open another session's URL
    r = httpx.post(
        f"{url}/sessions/b/v1/chat/completions",
        json=CHAT,
        headers={"authorization": f"Bearer {a['api_key']}"},
    )
    assert r.status_code == 401 and "'b'" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/sessions/b/close", json={}, headers={"x-api-key": a["api_key"]})
    assert r.status_code == 401
    ok = httpx.post(
        f"{url}/sessions/b/v1/chat/completions", json=CHAT, headers={"x-api-key": b["api_key"]}
    )
    assert ok.status_code == 200
    # unknown session without the admin key is not opened implicitly
    r = httpx.post(
        f"{url}/sessions/zzz/v1/chat/completions", json=CHAT, headers={"x-api-key": a["api_key"]}
    )
    assert r.status_code == 404 and "zzz" in r.json()["error"]["message"]
    hdr = {"x-api-key": a["api_key"], "content-type": "application/json"}
    r = httpx.post(f"{url}/v1/chat/completions", content=b"{not json", headers=hdr)
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": "x"}, headers=hdr)
    assert r.status_code == 400 and "'messages'" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": []}, headers=hdr)
    assert r.status_code == 400 and "'model'" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/chat/completions", content=b"x" * 5000, headers=hdr)
    assert r.status_code == 413 and "4096" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/nothing", json=CHAT, headers=hdr)
    assert r.status_code == 404
    r = httpx.post(f"{url}/sessions/a/close", json={"status": "bogus"}, headers=ADMIN)
    assert r.status_code == 400 and "bogus" in r.json()["error"]["message"]
    assert httpx.post(f"{url}/sessions/a/close", json={}, headers=ADMIN).status_code == 200
    r = httpx.post(f"{url}/sessions/a/v1/chat/completions", json=CHAT, headers=ADMIN)
    assert r.status_code == 409 and "closed" in r.json()["error"]["message"]
    for record in caplog.records:
        text = record.getMessage()
        assert "admin-secret" not in text and a["api_key"] not in text


def test_pause_policy_version_and_metrics(
    start_gateway: Callable[..., ThreadedServer], kafka: KafkaSettings, session_events: Events
) -> None:
    gw = start_gateway(admin_key="admin-secret", follow_policy_updates=True, pause_retry_after_s=7)
    url = gw.url
    base = f"{url}/sessions/p/v1/chat/completions"
    assert httpx.post(base, json=CHAT, headers=ADMIN).status_code == 200
    assert httpx.post(f"{url}/admin/pause", json={"paused": True}).status_code == 401
    assert httpx.post(f"{url}/admin/pause", json={"paused": True}, headers=ADMIN).json() == {
        "paused": True
    }
    r = httpx.post(base, json=CHAT, headers=ADMIN)
    assert r.status_code == 429 and r.headers["retry-after"] == "7"
    httpx.post(f"{url}/admin/pause", json={"paused": False}, headers=ADMIN)
    set_by_hand = httpx.post(f"{url}/admin/policy", json={"version": 3}, headers=ADMIN).json()
    assert (set_by_hand["policy_version"], set_by_hand["policy_run"]) == (3, "")
    assert httpx.post(f"{url}/admin/policy", json={"version": 2}, headers=ADMIN).status_code == 409
    assert (
        httpx.post(f"{url}/admin/policy", json={"version": "x"}, headers=ADMIN).status_code == 400
    )
    assert httpx.post(base, json=CHAT, headers=ADMIN).status_code == 200
    with EventPublisher(kafka) as pub:
        pub.publish_sync(
            POLICY_UPDATES,
            "run",
            PolicyUpdated(
                event_id=uuid.uuid4().hex, run_id="run", version=5, checkpoint_uri="file:///ck"
            ),
        )
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/health").json()["policy_version"] != 5:
        assert time.monotonic() < deadline, "policy update from the topic never arrived"
        time.sleep(0.2)
    assert httpx.post(base, json=CHAT, headers=ADMIN).status_code == 200
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert [s.policy_version for s in steps] == [0, 3, 5]
    metrics = httpx.get(f"{url}/metrics").text
    assert "rllm_gateway_policy_version 5" in metrics

    # a new run takes over from its version 0; its own older versions do not go back
    def publish_run2(*versions: int) -> None:
        with EventPublisher(kafka) as pub:
            for version in versions:
                pub.publish_sync(
                    POLICY_UPDATES,
                    "run2",
                    PolicyUpdated(
                        event_id=uuid.uuid4().hex,
                        run_id="run2",
                        version=version,
                        checkpoint_uri="x",
                    ),
                )

    def wait_for_run2(version: int) -> None:
        until = time.monotonic() + 30
        while True:
            now = httpx.get(f"{url}/admin/policy", headers=ADMIN).json()
            if (now["policy_run"], now["policy_version"]) == ("run2", version):
                return
            assert time.monotonic() < until, f"run2's version {version} never arrived: {now}"
            time.sleep(0.2)

    publish_run2(0, 1)
    wait_for_run2(1)
    # the stale version 0, then a version 2 that shows the follower has read past it
    publish_run2(0, 2)
    wait_for_run2(2)
    served = [
        e.version
        for e in (CODEC.decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES)))
        if isinstance(e, PolicyServed) and e.run_id == "run2"
    ]
    assert served[served.index(1) :] == [1, 2]  # acknowledged as adopted: never 0 again
    assert 'rllm_gateway_requests_total{api="chat",status="200"} 3' in metrics
    assert 'rllm_gateway_requests_total{api="gateway",status="429"} 1' in metrics
    assert "rllm_gateway_produce_latency_seconds_count" in metrics
    assert "# TYPE rllm_gateway_added_latency_seconds histogram" in metrics


def test_ingest_batch_refuses_bad_events_by_index(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(admin_key="admin-secret")
    good = [to_json_dict(e) for e in sample_session_events("ext/1", "run-x")]
    bad_step = dict(good[1])
    bad_step["payload"] = {**good[1]["payload"], "step_index": "two"}
    batch = [good[0], {"nope": 1}, bad_step, *good[1:], 7]
    assert httpx.post(f"{gw.url}/v1/events", json=batch).status_code == 401
    r = httpx.post(f"{gw.url}/v1/events", json={"events": batch}, headers=ADMIN)
    assert r.status_code == 207
    answer = r.json()
    assert answer["accepted"] == len(good)
    assert [e["index"] for e in answer["errors"]] == [1, 2, len(batch) - 1]
    assert "step_index" in answer["errors"][1]["error"]
    events = session_events()
    assert [e.event_id for _, e in events] == [g["event_id"] for g in good]
    assert {k for k, _ in events} == {"ext/1"}
    r = httpx.post(f"{gw.url}/v1/events", content=b"[", headers=ADMIN)
    assert r.status_code == 400


def test_idle_sessions_are_closed_with_status_timeout(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(idle_timeout_s=0.5)
    assert (
        httpx.post(
            f"{gw.url}/sessions/idle/1/v1/chat/completions", json=CHAT, headers=DEFAULT_ADMIN
        ).status_code
        == 200
    )
    deadline = time.monotonic() + 20
    while httpx.get(f"{gw.url}/health").json()["open_sessions"]:
        assert time.monotonic() < deadline, "the idle session was never closed"
        time.sleep(0.1)
    # the registry forgets the session before its SessionClosed is acknowledged
    while not any(isinstance(e.payload, SessionClosed) for _, e in session_events()):
        assert time.monotonic() < deadline + 10, "no SessionClosed on the topic"
        time.sleep(0.1)
    payloads = [e.payload for _, e in session_events()]
    closed = payloads[-1]
    assert isinstance(closed, SessionClosed)
    assert closed.status is SessionStatus.TIMEOUT and closed.num_steps == 1
    assert "idle timeout" in (closed.error or "")


def test_step_carries_the_version_the_local_server_says_generated_it(
    start_gateway: Callable[..., ThreadedServer],
    upstream: RunningUpstream,
    session_events: Events,
) -> None:
    """The gateway's own counter can be ahead of the server's reload; the server's policy
    header names the weights that generated the answer, and the step gets that version."""
    gw = start_gateway(admin_key="admin-secret")
    httpx.post(f"{gw.url}/admin/policy", json={"version": 4}, headers=ADMIN)
    base = f"{gw.url}/sessions/v/v1"
    upstream.state.served_version = 3
    try:
        assert httpx.post(f"{base}/chat/completions", json=CHAT, headers=ADMIN).status_code == 200
        with httpx.stream(
            "POST", f"{base}/chat/completions", json={**CHAT, "stream": True}, headers=ADMIN
        ) as r:
            assert r.status_code == 200 and "[DONE]" in r.read().decode()
        done = httpx.post(f"{base}/completions", json={"model": "m", "prompt": "x"}, headers=ADMIN)
        assert done.status_code == 200
    finally:
        upstream.state.served_version = None
    assert httpx.post(f"{base}/chat/completions", json=CHAT, headers=ADMIN).status_code == 200
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert [s.policy_version for s in steps] == [3, 3, 3, 4]


def test_close_publishes_its_events_before_session_closed_and_refuses_bad_ones_whole(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    from tests.samples import REWARD

    gw = start_gateway(admin_key="admin-secret")
    opened = httpx.post(f"{gw.url}/sessions", json={"session_id": "c/1"}, headers=ADMIN).json()
    key = {"x-api-key": opened["api_key"]}

    def reward(event_id: str, session_id: str = "c/1") -> dict[str, object]:
        ev = SessionEvent(
            event_id=event_id, session_id=session_id, run_id="default", producer="t", payload=REWARD
        )
        return to_json_dict(ev)

    # one bad event (another session's) refuses the whole close: nothing published
    r = httpx.post(
        f"{gw.url}/sessions/c/1/close",
        json={"status": "ok", "events": [reward("r1"), reward("x", session_id="other")]},
        headers=key,
    )
    assert r.status_code == 400
    assert "session stays open" in r.text and "'other'" in r.text
    assert httpx.get(f"{gw.url}/health").json()["open_sessions"] == 1
    r = httpx.post(f"{gw.url}/sessions/c/1/close", json={"events": "r1"}, headers=key)
    assert r.status_code == 400 and "must be a list" in r.text
    r = httpx.post(
        f"{gw.url}/sessions/c/1/close",
        json={"status": "ok", "events": [reward("r1"), reward("r2")]},
        headers=key,
    )
    assert r.status_code == 200, r.text
    events = [e for k, e in session_events() if k == "c/1"]
    kinds = [(type(e.payload).__name__, e.event_id) for e in events]
    assert [k for k, _ in kinds] == [
        "SessionOpened",
        "RewardAssigned",
        "RewardAssigned",
        "SessionClosed",
    ]
    assert [i for _, i in kinds[1:3]] == ["r1", "r2"]


def test_bulk_open_and_close_answer_each_item_and_refuse_only_the_bad_ones(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(admin_key="admin-secret")
    items = [
        {"session_id": "b/1", "task": {"task_id": "t"}, "rollout_index": 0, "group_size": 2},
        {"session_id": "b/2", "task": {"task_id": "t"}, "rollout_index": 1, "group_size": 2},
        {"session_id": "b/1"},  # already open (by the first item)
        "not a session",
    ]
    assert httpx.post(f"{gw.url}/sessions", json=items).status_code == 401
    r = httpx.post(f"{gw.url}/sessions", json=items, headers=ADMIN)
    assert r.status_code == 200, r.text
    first, second, dup, bad = r.json()
    assert (first["session_id"], second["session_id"]) == ("b/1", "b/2")
    assert first["base_url"].endswith("/sessions/b/1/v1") and first["api_key"] != second["api_key"]
    assert dup["error"]["code"] == 409 and "'b/1' is already open" in dup["error"]["message"]
    assert bad["error"]["code"] == 400 and "'not a session'" in bad["error"]["message"]
    assert httpx.get(f"{gw.url}/health").json()["open_sessions"] == 2
    r = httpx.post(f"{gw.url}/sessions", json=[], headers=ADMIN)
    assert r.status_code == 400 and "1 to 1024 items, got 0" in r.json()["error"]["message"]

    closes = [
        {"session_id": "b/2", "api_key": second["api_key"], "status": "error", "error": "boom"},
        {"session_id": "b/1", "api_key": "wrong", "status": "ok"},
        {"session_id": "nope", "status": "ok"},
        {"session_id": "b/1", "api_key": first["api_key"], "status": "bogus"},
        {"api_key": "sekret-key"},
    ]
    r = httpx.post(f"{gw.url}/sessions/close", json=closes)
    assert r.status_code == 200, r.text
    ok, wrong, unknown, bogus, nameless = r.json()
    assert nameless["error"]["code"] == 400 and "session_id string" in r.text
    assert "sekret-key" not in r.text
    assert ok == {
        "session_id": "b/2",
        "num_steps": 0,
        "status": "error",
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }
    assert wrong["error"]["code"] == 401 and unknown["error"]["code"] == 404
    assert bogus["error"]["code"] == 400 and "'bogus'" in bogus["error"]["message"]
    assert httpx.get(f"{gw.url}/health").json()["open_sessions"] == 1
    r = httpx.post(
        f"{gw.url}/sessions/close", json=[{"session_id": "b/2", "api_key": second["api_key"]}]
    )
    assert r.json()[0]["error"]["code"] == 409  # closed already
    r = httpx.post(f"{gw.url}/sessions/close", json={"session_id": "b/1"})
    assert r.status_code == 400 and "needs a JSON list" in r.json()["error"]["message"]
    kinds = [(k, type(e.payload).__name__) for k, e in session_events() if k.startswith("b/")]
    assert sorted(kinds) == [
        ("b/1", "SessionOpened"),
        ("b/2", "SessionClosed"),
        ("b/2", "SessionOpened"),
    ]


async def test_concurrent_opens_and_closes_of_the_sdk_share_requests(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    import asyncio

    from rllm.producers.sdk.client import GatewayClient
    from rllm.schemas.types import Task

    gw = start_gateway(admin_key="admin-secret")
    client = GatewayClient(gw.url, admin_key="admin-secret")
    sent: list[tuple[str, int]] = []
    send = client._send

    async def counting(path: str, body: object, key: str | None, replay_safe: bool) -> object:
        sent.append((path, len(body) if isinstance(body, list) else 1))
        return await send(path, body, key, replay_safe)

    client._send = counting  # type: ignore[method-assign,assignment]  # counts the sends, then calls the real one
    try:
        handles = await asyncio.gather(
            *(
                client.open_session(Task(task_id="g"), run_id="r", session_id=f"g/{i}")
                for i in range(12)
            )
        )
        assert [h.session_id for h in handles] == [f"g/{i}" for i in range(12)]
        assert sent == [("/sessions", 12)]
        with pytest.raises(Exception, match="409 session 'g/0' is already open"):
            await client.open_session(Task(task_id="g"), run_id="r", session_id="g/0")
        steps = await asyncio.gather(*(client.close_session(h, SessionStatus.OK) for h in handles))
        assert steps == [0] * 12
        assert sent[2:] == [("/sessions/close", 12)]
    finally:
        await client.aclose()
    closed = [k for k, e in session_events() if isinstance(e.payload, SessionClosed)]
    assert sorted(closed) == sorted(f"g/{i}" for i in range(12))
