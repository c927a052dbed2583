"""Pure parts of the gateway: routing, sessions, delta encoding, spool file, metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from rllm.producers.gateway.capture import common_prefix_len, delta_prompt, step_event
from rllm.producers.gateway.metrics import Metrics
from rllm.producers.gateway.routing import parse_session_path, request_key, unaddressable
from rllm.producers.gateway.sessions import Session, SessionRegistry
from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.spool import Spool
from rllm.producers.gateway.types import Capture
from rllm.schemas.types import ApiKind, SessionEvent, StepCaptured, StepError, Task, TokenStatus


@pytest.mark.parametrize(
    ("rest", "sid", "action", "api"),
    [
        ("abc/v1/chat/completions", "abc", "v1", "chat/completions"),
        ("run/1/task:7/v1/messages", "run/1/task:7", "v1", "messages"),
        ("a:b/v1", "a:b", "v1", ""),
        ("x/y/close", "x/y", "close", ""),
        ("x/y", "x/y", "info", ""),
    ],
)
def test_session_paths(rest: str, sid: str, action: str, api: str) -> None:
    route = parse_session_path(rest)
    assert route is not None
    assert (route.session_id, route.action, route.api_path) == (sid, action, api)


@pytest.mark.parametrize(
    ("sid", "refused"),
    [
        ("run/1/task:7", False),
        ("a/v1x/b", False),
        ("v1", False),
        ("a/v1/b", True),
        ("x/v1", True),
        ("x/close", True),
        ("x/", True),
    ],
)
def test_an_id_its_paths_would_not_reach_is_unaddressable(sid: str, refused: bool) -> None:
    reason = unaddressable(sid)
    assert (reason is not None) is refused
    if reason is not None:
        assert reason.startswith(f"session id {sid!r} cannot be used in the gateway's paths")


def test_session_path_without_id_and_keys() -> None:
    assert parse_session_path("") is None
    assert request_key({"authorization": "Bearer abc"}) == "abc"
    assert request_key({"authorization": "bearer  abc "}) == "abc"
    assert request_key({"x-api-key": "k"}) == "k"
    assert request_key({}) is None


def test_registry_keys_and_closing() -> None:
    reg = SessionRegistry(remember_closed=2)
    s = reg.open("a/b", "r", Task(task_id="t"))
    assert reg.by_key(s.key) is s and reg.by_key(s.key + "x") is None
    assert reg.close("a/b") is s and reg.by_key(s.key) is None and reg.is_closed("a/b")
    for i in range(3):
        reg.open(str(i), "r", Task(task_id="t"))
        reg.close(str(i))
    assert not reg.is_closed("a/b") and reg.is_closed("2")


def test_common_prefix_and_delta() -> None:
    a = np.array([1, 2, 3, 4], dtype=np.int32)
    assert common_prefix_len(a, np.array([1, 2, 9], dtype=np.int32)) == 2
    assert common_prefix_len(a, a) == 4
    assert common_prefix_len(a, np.zeros(0, dtype=np.int32)) == 0
    k, suffix = delta_prompt(a, np.array([1, 2, 3, 4, 5, 6], dtype=np.int32))
    assert k == 4 and suffix.tolist() == [5, 6]


def _cap(prompt: list[int] | None, response: list[int] | None) -> Capture:
    return Capture(
        api=ApiKind.CHAT,
        model="m",
        request={},
        started_at=datetime.now(UTC),
        upstream="u",
        policy_version=2,
        prompt_ids=prompt,
        response_ids=response,
        logprobs=[-0.5] * len(response or []),
    )


def _step(session: Session, cap: Capture, index: int, producer: str) -> SessionEvent:
    event, delta = step_event(session, cap, index, producer)
    session.advance(delta)
    return event


def test_step_event_delta_chain_restores_full_prompts() -> None:
    reg = SessionRegistry()
    s = reg.open("s", "r", Task(task_id="t"))
    e0 = _step(s, _cap([1, 2, 3], [4, 5]), 0, "p")
    e1 = _step(s, _cap([1, 2, 3, 4, 9, 7], [8]), 1, "p")  # diverges after the prefix
    failed = _cap(None, None)
    failed.error = StepError(kind="upstream_status", message="x", status_code=500)
    e2 = _step(s, failed, 2, "p")
    e3 = _step(s, _cap([1, 2, 3, 4, 9, 7, 8, 10], [11]), 3, "p")
    p0, p1, p2, p3 = (e.payload for e in (e0, e1, e2, e3))
    assert all(isinstance(p, StepCaptured) for p in (p0, p1, p2, p3))
    assert isinstance(p0, StepCaptured) and isinstance(p1, StepCaptured)
    assert isinstance(p2, StepCaptured) and isinstance(p3, StepCaptured)
    assert (p0.prompt_prefix_len, p0.parent_step_id) == (0, None)
    assert (p1.prompt_prefix_len, p1.parent_step_id, p1.prompt_ids.tolist()) == (
        4,
        p0.step_id,
        [9, 7],
    )
    assert p2.token_status is TokenStatus.MISSING and p2.error is not None
    assert (p3.prompt_prefix_len, p3.parent_step_id) == (7, p1.step_id)
    assert p3.prompt_ids.tolist() == [10] and p3.policy_version == 2
    assert s.num_steps == 4 and e3.session_id == "s"


def test_spool_appends_reads_in_order_and_survives_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path, fsync=False)
    for i in range(5):
        spool.append("topic", f"k{i}".encode() if i else None, bytes([i]) * (i + 1))
    assert spool.depth == 5
    first = spool.read(2)
    assert [(e.key, e.value) for e in first] == [(None, b"\x00"), (b"k1", b"\x01\x01")]
    spool.advance(first[-1], 2)
    spool.close()
    with open(tmp_path / "events.spool", "ab") as f:
        f.write(b"\x05\x00\x00")  # a torn frame from a crash
    again = Spool(tmp_path, fsync=False)
    assert again.depth == 3
    rest = again.read(10)
    assert [e.value for e in rest] == [b"\x02" * 3, b"\x03" * 4, b"\x04" * 5]
    assert not again.reset_if_empty()
    again.advance(rest[-1], 3)
    assert again.reset_if_empty() and (tmp_path / "events.spool").stat().st_size == 0
    again.append("t", None, b"z")
    assert [e.value for e in again.read()] == [b"z"]
    again.close()


def test_metrics_text() -> None:
    m = Metrics()
    m.inc("rllm_gateway_requests_total", api="chat", status="200")
    m.inc("rllm_gateway_requests_total", api="chat", status="200")
    m.observe("rllm_gateway_added_latency_seconds", 0.0007)
    m.gauge("rllm_gateway_spool_depth", "depth", lambda: 4)
    text = m.render()
    assert 'rllm_gateway_requests_total{api="chat",status="200"} 2' in text
    assert 'rllm_gateway_added_latency_seconds_bucket{le="0.001"} 1' in text
    assert 'rllm_gateway_added_latency_seconds_bucket{le="0.0005"} 0' in text
    assert "rllm_gateway_spool_depth 4" in text


def test_settings_refuse_bad_upstream_url() -> None:
    assert GatewaySettings(upstream_url="http://h:1/v1/").upstream_url == "http://h:1"
    with pytest.raises(ValueError, match="ftp://x"):
        GatewaySettings(upstream_url="ftp://x")


def test_idle_sessions_by_last_call() -> None:
    reg = SessionRegistry()
    a = reg.open("a", "r", Task(task_id="t"))
    b = reg.open("b", "r", Task(task_id="t"))
    b.take_index()
    assert reg.idle(10.0, now=a.last_seen + 5) == []
    assert reg.idle(1.0, now=b.last_seen + 1.5) == [a, b]
    b.last_seen += 10
    assert reg.idle(1.0, now=a.last_seen + 1.5) == [a]
