"""``infra/kafka/start`` on the cluster ids it can be handed: one that begins with '-'
(a 1-in-64 draw of base64) must still format and serve, not be read by kafka-storage's
argparse as a missing value (a CI run lost its fault test that way)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from tests.paths import ROOT


def _free_pair() -> int:
    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return int(port)
    raise AssertionError("no two free adjacent ports")


def test_a_cluster_id_starting_with_a_dash_formats_and_serves(tmp_path: Path) -> None:
    port, data = _free_pair(), tmp_path / "kafka"
    env = {**os.environ, "RLLM_KAFKA_CLUSTER_ID": "-3kJwJ1SzO3Hwl_71mMC9w"}
    start = [str(ROOT / "infra/kafka/start"), "--port", str(port)]
    start += ["--controller-port", str(port + 1), "--data-dir", str(data)]
    try:
        started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        assert f"kafka listening on 127.0.0.1:{port}" in started.stdout
        meta = (data / "data" / "meta.properties").read_text()
        assert "cluster.id=-3kJwJ1SzO3Hwl_71mMC9w" in meta.splitlines()
    finally:
        subprocess.run(
            [str(ROOT / "infra/kafka/stop"), "--data-dir", str(data), "--purge"],
            capture_output=True,
            timeout=120,
        )
