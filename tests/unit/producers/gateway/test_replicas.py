"""Several upstream replicas (issue 36 item 2): the routing policy (a session sticks, a new
one goes to the least loaded, a replica taken out moves its sessions with a note), the
setting, and the policy every live replica must confirm before the gateway serves it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from pydantic import ValidationError

from rllm.producers.gateway.metrics import Metrics
from rllm.producers.gateway.policy import PolicyTracker
from rllm.producers.gateway.replicas import Replica, ReplicaSet
from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.sink import EventSink
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.upstreams import Upstream
from rllm.schemas.lineage import PolicyPointer
from rllm.schemas.policy import PolicyUpdated
from tests.fakes.loopback import LoopbackServer
from tests.fakes.server import ThreadedServer
from tests.fakes_training.vllm import FakeVllm
from tests.unit.producers.gateway.waiting import until

A, B, C = "http://a:8000", "http://b:8000", "http://c:8000"


def _replicas(*urls: str) -> ReplicaSet:
    """Replicas at ``urls`` (none listens there unless a test serves one)."""
    settings = GatewaySettings(insecure=True, upstream_urls=urls)
    return ReplicaSet([Replica(Upstream(settings, url=url)) for url in settings.replicas])


def _urls(replicas: ReplicaSet, *sessions: str) -> list[str]:
    return [replicas.route(sid)[0].url for sid in sessions]


def test_the_setting_takes_a_list_and_keeps_a_single_upstream_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = GatewaySettings(upstream_url="http://x:1/v1/")
    assert (one.upstream_url, one.upstream_urls, one.replicas) == (
        "http://x:1",
        (),
        ("http://x:1",),
    )
    monkeypatch.setenv("RLLM_GATEWAY_UPSTREAM_URLS", f"{A}/v1, {B}")
    two = GatewaySettings()
    assert (two.upstream_url, two.replicas) == (A, (A, B)), "the first is upstream_url"
    with pytest.raises(ValidationError, match="replica 'http://a:8000' is named twice"):
        GatewaySettings(upstream_urls=(A, f"{A}/v1"))
    with pytest.raises(ValidationError, match="'ftp://b' must start with http"):
        GatewaySettings(upstream_urls=(A, "ftp://b"))
    assert GatewaySettings(upstream_url=f"{A}, {B}/v1").replicas == (A, B), "a list"
    monkeypatch.setenv("RLLM_GATEWAY_UPSTREAM_URL", f"{C} {B}")
    assert GatewaySettings().replicas == (A, B), "upstream_urls first"
    monkeypatch.delenv("RLLM_GATEWAY_UPSTREAM_URLS")
    assert (GatewaySettings().upstream_url, GatewaySettings().replicas) == (C, (C, B))


def test_the_cli_takes_upstream_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import rllm.producers.gateway as gateway_pkg
    from rllm.cli.gateway import gateway

    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(gateway_pkg, "serve", lambda s, k: seen.append(s.replicas))
    runner = CliRunner()
    for args, env in (
        (["--upstream", A, "--upstream", f"{B}/v1"], {}),
        ([], {"RLLM_GATEWAY_UPSTREAM_URL": f"{A} {C}"}),
        (["--upstream", B], {}),
    ):
        result = runner.invoke(gateway, ["--insecure", *args], env=env)
        assert result.exit_code == 0, result.output
    assert seen == [(A, B), (A, C), (B,)]


def test_a_session_sticks_and_new_sessions_go_to_the_least_loaded() -> None:
    replicas = _replicas(A, B, C)
    assert _urls(replicas, "s1", "s2", "s3") == [A, B, C], "ties: fewest sessions, then order"
    assert _urls(replicas, "s1", "s1", "s2", "s3", "s1") == [A, A, B, C, A], "sticky"
    assert [r.sessions for r in replicas] == [1, 1, 1]
    a, b, c = replicas.replicas
    a.in_flight, b.in_flight, c.in_flight = 3, 0, 1
    assert _urls(replicas, "s4") == [B], "fewest calls in flight first"
    b.in_flight = 1  # s4's call
    assert _urls(replicas, "s5") == [C], "then fewest sessions (b has 2 now)"
    assert _urls(replicas, "s1") == [A], "a busy replica keeps its sessions"
    replicas.release("s2")
    replicas.release("s4")
    replicas.release("never-routed")
    assert [r.sessions for r in replicas] == [1, 0, 2]
    b.in_flight = 3
    assert _urls(replicas, "s6") == [C], "in flight outweighs sessions"


def test_a_replica_taken_out_moves_its_sessions_with_a_note_in_their_next_call() -> None:
    replicas = _replicas(A, B)
    a, b = replicas.replicas
    seen: list[bool] = []
    replicas.changed.append(lambda: seen.append(a.live))
    assert _urls(replicas, "s1", "s2", "s3") == [A, B, A]
    assert replicas.take_out(a, f"upstream {A} unreachable (ConnectError)") is True
    assert replicas.take_out(a, "again") is False, "taken out once"
    assert seen == [False]
    moved, note = replicas.route("s1")
    assert moved is b and note is not None
    assert f"replica {A} was taken out (upstream {A} unreachable (ConnectError))" in note
    assert f"moved to {B}" in note
    assert replicas.route("s1") == (b, None), "the note is on its next call only"
    assert replicas.route("s2") == (b, None), "b's own sessions do not move"
    assert replicas.route("new")[0] is b, "nothing new goes to a replica taken out"
    assert [r.sessions for r in replicas] == [1, 3], "s3 has not called since"
    assert replicas.route("s3")[0] is b
    replicas.bring_back(a)
    assert seen == [False, True] and a.down_reason is None
    assert replicas.route("s1") == (b, None), "sessions stay where they moved"
    assert replicas.route("after")[0] is a, "new sessions go to it again"


def test_with_no_replica_live_a_session_stays_and_a_lone_one_is_never_taken_out() -> None:
    lone = _replicas(A)
    assert lone.take_out(lone.first, "down") is False and lone.first.live
    replicas = _replicas(A, B)
    a, b = replicas.replicas
    assert _urls(replicas, "s1", "s2") == [A, B]
    replicas.take_out(a, "down")
    replicas.take_out(b, "down")
    assert replicas.route("s1") == (a, None) and replicas.route("s2") == (b, None)
    assert replicas.route("s3")[0] is a, "a new one: the first (its call fails naming it)"


async def test_probing_brings_back_a_replica_whose_health_answers() -> None:
    health = {A: False}

    def serve(name: str) -> LoopbackServer:
        def handle(request: httpx.Request) -> httpx.Response:
            if not health.get(name, True):
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(404)

        return LoopbackServer(handle)

    servers = [serve(A), serve(B)]
    replicas = _replicas(*(s.url for s in servers))
    a = replicas.first
    a.policy, a.served_model = PolicyPointer("r", 3), "r-v3"
    replicas.ready = lambda replica: replica.policy is not None
    replicas.take_out(a, "down")
    assert (a.policy, a.served_model) == (None, None), "asked again before it comes back"
    probe = asyncio.create_task(replicas.probe(0.01))
    try:
        await asyncio.sleep(0.05)
        assert a.live is False
        health[A] = True
        await asyncio.sleep(0.05)
        assert a.live is False, "it answers, but has not confirmed a policy yet"
        a.policy = PolicyPointer("r", 3)
        await until(lambda: a.live, "never brought back")
    finally:
        probe.cancel()
        for up in replicas:
            await up.upstream.aclose()
        for server in servers:
            server.stop()


class _Sink:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def submit(self, topic: str, key: str, record: Any) -> None:
        self.records.append(record)


def _record(tmp_path: Path, version: int) -> PolicyUpdated:
    folder = tmp_path / "r" / f"v{version:06d}"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    return PolicyUpdated(
        event_id=f"r/v{version}", run_id="r", version=version, checkpoint_uri=folder.as_uri()
    )


async def test_a_version_is_served_once_every_live_replica_confirms_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fakes = {A: FakeVllm(), B: FakeVllm()}
    servers = {name: ThreadedServer(fake.app) for name, fake in fakes.items()}
    urls = tuple(server.url for server in servers.values())
    settings = GatewaySettings(insecure=True, upstream_urls=urls, policy_sync="vllm")
    upstreams = [Upstream(settings, url=url) for url in urls]
    replicas = ReplicaSet([Replica(up) for up in upstreams])
    sink = _Sink()
    state = GatewayState(
        settings, upstreams[0], cast(EventSink, sink), Metrics(), replicas=replicas
    )
    a, b = replicas.replicas
    tracker = PolicyTracker(state, poll_s=0.01, max_poll_s=0.05)
    task = asyncio.create_task(tracker.run())
    try:
        tracker.offer(_record(tmp_path, 1))
        await until(lambda: state.policy_version == 1, "v1 never served")
        assert (a.policy_version, b.policy_version, state.served_model) == (1, 1, "r-v1")
        assert [r.version for r in sink.records] == [1]
        # b refuses v2: a serves it (its steps say so), the gateway's version stays 1
        fakes[B].refuse.add(str(tmp_path / "r" / "v000002"))
        caplog.set_level(logging.ERROR, "rllm.gateway")
        tracker.offer(_record(tmp_path, 2))
        await until(lambda: b.sync_error is not None, "b never refused")
        await until(lambda: a.policy_version == 2, "a never loaded v2")
        assert (state.policy_version, b.policy_version, a.served_model) == (1, 1, "r-v2")
        assert state.sync_error is not None and state.sync_error[0] == PolicyPointer("r", 2)
        assert state.sync_error[1].startswith(f"upstream {urls[1]}: ")
        assert f"policy r version 2 is not served by upstream {urls[1]}" in caplog.text
        assert [r.version for r in sink.records] == [1]
        # b taken out: every live replica (a) serves v2, so the gateway does
        replicas.take_out(b, "unreachable")
        assert (state.policy_version, state.served_model) == (2, "r-v2")
        assert [r.version for r in sink.records] == [1, 2]
        assert f"upstream replica {urls[1]} taken out (serving policy version 1)" in caplog.text
    finally:
        task.cancel()
        for up in upstreams:
            await up.aclose()
        for server in servers.values():
            server.stop()
