"""The CLI a new user runs: up, status, events demo / tail, down; corrupt records reported."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from rllm.kafka import EventPublisher, make_producer
from rllm.producers.sdk import GatewayClient
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionStatus, Task
from rllm.settings import KafkaSettings
from tests.ports import free_broker_port
from tests.samples import session_events


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rllm.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _env(kafka: KafkaSettings) -> dict[str, str]:
    return {
        "RLLM_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RLLM_TOPIC_PREFIX": kafka.topic_prefix,
    }


def test_tail_json_decodes_events_and_reports_a_corrupt_record_with_offset(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    events = session_events("s-1")
    with EventPublisher(kafka) as pub:
        for ev in events[:2]:
            pub.publish_sync(SESSION_EVENTS, "s-1", ev)
    raw = make_producer(kafka)
    raw.produce(kafka.topic(SESSION_EVENTS), key=b"s-1", value=b"\x00\x01not avro at all")
    raw.flush(10)
    with EventPublisher(kafka) as pub:
        pub.publish_sync(SESSION_EVENTS, "s-1", events[2])

    proc = cli(
        "events", "tail", "--topic", SESSION_EVENTS, "--from-beginning", "--json", env=_env(kafka)
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["offset"] for line in lines] == [0, 1, 2, 3]
    assert [line.get("type") for line in lines] == [
        "SessionEvent",
        "SessionEvent",
        None,
        "SessionEvent",
    ]
    assert lines[1]["event"]["payload"]["type"] == "StepCaptured"
    assert lines[1]["event"]["payload"]["prompt_token_ids"] == [7, 8, 9]
    assert lines[2]["key"] == "s-1"
    assert "schema id 1" in lines[2]["error"] or "UnknownSchemaError" in lines[2]["error"]
    assert "1 undecodable record(s)" in proc.stderr

    text = cli("events", "tail", "--topic", SESSION_EVENTS, "--from-beginning", env=_env(kafka))
    assert text.returncode == 0
    assert "0:2 key=s-1" in text.stdout and "undecodable" in text.stdout


def test_tail_without_from_beginning_says_it_reads_only_new_records(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]]
) -> None:
    make_topics(partitions=1)
    with EventPublisher(kafka) as pub:
        pub.publish_sync(SESSION_EVENTS, "s-1", session_events("s-1")[0])
    proc = cli("events", "tail", env=_env(kafka))
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "tail reads only records that arrive while it runs; --from-beginning" in proc.stderr


def test_a_down_broker_is_one_line_naming_up_not_librdkafka_noise(
    kafka: KafkaSettings, tmp_path: Path
) -> None:
    down = f"127.0.0.1:{free_broker_port()}"
    tail = cli("events", "tail", "--from-beginning", env={"RLLM_BOOTSTRAP_SERVERS": down})
    assert tail.returncode == 1 and "rllm-cli up" in tail.stderr
    assert "%3|" not in tail.stderr and len(tail.stderr.strip().splitlines()) == 1, tail.stderr
    # train checks the broker, then the gateway, before it loads a model or writes anything
    began = time.monotonic()
    ckpt = tmp_path / "ckpt"
    one_update = ("train", "--benchmark", "multiply", "--max-updates", "1")
    train = cli(*one_update, "--checkpoint-dir", str(ckpt), env={"RLLM_BOOTSTRAP_SERVERS": down})
    assert train.returncode == 1 and "rllm-cli up" in train.stderr, train.stderr
    assert "%3|" not in train.stderr and time.monotonic() - began < 30
    no_gateway = f"http://127.0.0.1:{free_broker_port()}"
    train = cli(
        *one_update,
        "--checkpoint-dir",
        str(ckpt),
        "--gateway-url",
        no_gateway,
        env=_env(kafka),
    )
    assert train.returncode == 1, train.stderr
    assert f"the gateway at {no_gateway} does not answer" in train.stderr
    assert not ckpt.exists()


def test_tail_of_a_missing_topic_is_one_clear_line(kafka: KafkaSettings) -> None:
    proc = cli("events", "tail", "--topic", "no-such-topic", "--from-beginning", env=_env(kafka))
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr and "no-such-topic" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_bootstrap_setting_names_the_value() -> None:
    proc = cli("events", "tail", "--from-beginning", env={"RLLM_BOOTSTRAP_SERVERS": "nocolon"})
    assert proc.returncode == 2
    assert "'nocolon'" in proc.stderr and "Traceback" not in proc.stderr


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_up_status_demo_tail_down_for_a_new_user(tmp_path: Path) -> None:
    port = free_broker_port()
    env = {
        "RLLM_HOME": str(tmp_path / "home"),
        "RLLM_KAFKA_PORT": str(port),
        "RLLM_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
        "RLLM_SERVICES": "",
    }
    try:
        up = cli("up", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"127.0.0.1:{port}" in up.stdout and "rllm.session-events" in up.stdout
        again = cli("up", env=env)
        assert again.returncode == 0, again.stderr
        status = cli("status", env=env)
        assert status.returncode == 0 and "up" in status.stdout

        demo = cli("events", "demo", env=env)
        assert demo.returncode == 0, demo.stderr
        tail = cli(
            "events",
            "tail",
            "--topic",
            "rllm.session-events",
            "--from-beginning",
            "--json",
            env=env,
        )
        assert tail.returncode == 0, tail.stderr
        kinds = [json.loads(line)["event"]["payload"]["type"] for line in tail.stdout.splitlines()]
        assert kinds == [
            "SessionOpened",
            "StepCaptured",
            "StepCaptured",
            "StepCaptured",
            "RewardAssigned",
            "SessionClosed",
        ]
    finally:
        down = cli("down", env=env)
    assert down.returncode == 0, down.stderr
    assert not _port_open(port) and not _port_open(port + 1)
    after = cli("status", env=env)
    assert after.returncode == 1 and "down" in after.stdout
    assert cli("down", env=env).returncode == 0, "down is idempotent"


def _start_gateway_cli(env: dict[str, str], port: int, *flags: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rllm.cli", "gateway", "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    deadline = time.monotonic() + 60
    while not _port_open(port):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return out


def test_gateway_cli_is_secure_by_default_and_the_sdk_reads_its_key(
    tmp_path: Path,
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_topics(partitions=1)
    home = tmp_path / "home"
    monkeypatch.delenv("RLLM_ADMIN_KEY", raising=False)
    monkeypatch.delenv("RLLM_GATEWAY_ADMIN_KEY", raising=False)
    monkeypatch.setenv("RLLM_HOME", str(home))  # the SDK below reads the same key file
    env = {**_env(kafka), "RLLM_GATEWAY_FOLLOW_POLICY_UPDATES": "false"}
    port = free_broker_port()
    proc = _start_gateway_cli(env, port)
    try:
        url = f"http://127.0.0.1:{port}"
        key_file = home / "gateway" / "admin-key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert httpx.post(f"{url}/sessions", json={}).status_code == 401
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        made_up = httpx.post(f"{url}/sessions/x/v1/chat/completions", json=chat)
        assert made_up.status_code == 404, made_up.text

        async def open_and_close() -> int:
            client = GatewayClient(url)  # no key given: $RLLM_HOME/gateway/admin-key
            try:
                handle = await client.open_session(Task(task_id="t"), run_id="r")
                return await client.close_session(handle, SessionStatus.OK)
            finally:
                await client.aclose()

        assert asyncio.run(open_and_close()) == 0
        assert httpx.get(f"{url}/health", headers={"authorization": f"Bearer {key}"}).is_success
    finally:
        out = _stop(proc)
    assert key not in out, "the admin key must not be logged"
    assert str(key_file) in out

    port = free_broker_port()
    proc = _start_gateway_cli(env, port, "--insecure")
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/sessions", json={"session_id": "s"})
        assert r.status_code == 201
    finally:
        out = _stop(proc)
    assert "INSECURE" in out and "--insecure" in out
