"""``rllm-cli history`` holds the chDB directory; ``rllm-cli analytics`` in another process
answers through its socket, and opens the directory itself once the service has stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rllm.kafka import EventPublisher
from rllm.schemas import topics as tp
from rllm.settings import KafkaSettings
from tests import samples


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rllm.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_history_service_and_analytics(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    make_topics(partitions=1)
    with EventPublisher(kafka) as pub:
        for i in range(6):
            for ev in samples.session_events(session_id=f"s-{i}", run_id=f"run-{i % 3}"):
                pub.publish(tp.SESSION_EVENTS, ev.session_id, ev)
    env = {
        **os.environ,
        "RLLM_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RLLM_TOPIC_PREFIX": kafka.topic_prefix,
        "RLLM_HISTORY_DIR": str(tmp_path / "h"),
        "RLLM_HISTORY_GROUP_ID": f"{kafka.topic_prefix}h",
        "RLLM_HISTORY_BATCH_S": "0.3",
    }
    env.pop("RLLM_CLICKHOUSE_URL", None)
    service = subprocess.Popen(
        [sys.executable, "-m", "rllm.cli", "history", "--until-idle", "8"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        sock = tmp_path / "h.sock"
        deadline = time.monotonic() + 60
        runs: list[dict[str, object]] = []
        while time.monotonic() < deadline and [r["steps"] for r in runs] != [4, 4, 4]:
            time.sleep(1)
            if sock.exists():
                res = _cli("analytics", "runs", "--format", "json", env=env)
                assert res.returncode == 0, res.stderr
                runs = json.loads(res.stdout)
        assert sorted(r["run_id"] for r in runs) == ["run-0", "run-1", "run-2"]
        assert [r["steps"] for r in runs] == [4, 4, 4]
        assert service.poll() is None  # the answer came through the running service
        out, _ = service.communicate(timeout=60)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    assert "30 events" in out and "0 dead letters" in out
    assert not sock.exists()
    alone = _cli("analytics", "failures", "--format", "csv", env=env)  # opens the dir itself
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.splitlines()[1].startswith("step,upstream_status,smollm2-135m 502,6,")
