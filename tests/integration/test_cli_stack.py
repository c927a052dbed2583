"""The CLI a new user runs: up, status, events demo / tail, down; corrupt records reported."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rllm.kafka import EventPublisher, make_producer
from rllm.schemas.topics import SESSION_EVENTS
from rllm.settings import KafkaSettings
from tests.conftest import _free_port
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
    port = _free_port()
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
