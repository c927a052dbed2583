"""The whole local stack as a user runs it: ``up`` (broker, gateway, processors, history),
``eval`` through the gateway, ``analytics`` over the history, ``down``.

The model is the deterministic fake upstream (a test double of the model server only);
everything else is the real thing, each service in its own process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.fakes.upstream import start_fake_upstream
from tests.integration.helpers import fake_model_setup
from tests.integration.test_cli_stack import _port_open, cli
from tests.paths import BENCHMARK_FIXTURES as FIXTURES
from tests.ports import free_broker_port


def test_up_eval_analytics_down(tmp_path: Path) -> None:
    upstream = start_fake_upstream()
    kafka_port, gateway_port = free_broker_port(), free_broker_port()
    env = {
        "RLLM_HOME": str(tmp_path / "home"),
        "RLLM_CONFIG_DIR": str(tmp_path / "config"),
        "RLLM_KAFKA_PORT": str(kafka_port),
        "RLLM_BOOTSTRAP_SERVERS": f"127.0.0.1:{kafka_port}",
        "RLLM_GATEWAY_PORT": str(gateway_port),
        "RLLM_GATEWAY_URL": f"http://127.0.0.1:{gateway_port}",
        "RLLM_SERVICES": "gateway,processors,history",
    }
    setup = cli(*fake_model_setup(upstream.url), env=env)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    try:
        up = cli("up", "--model", "fake", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        for name in ("gateway", "processors", "history"):
            assert f" {name} " in up.stdout, up.stdout
        status = cli("status", env=env)
        assert status.returncode == 0, status.stdout

        ev = cli(
            "eval",
            "gsm8k",
            "--data-file",
            str(FIXTURES / "gsm8k.parquet"),
            "--attempts",
            "2",
            "--run-id",
            "stack-run",
            "--model",
            "fake",
            "--json",
            env=env,
        )
        assert ev.returncode == 0, ev.stdout + ev.stderr
        summary = json.loads(ev.stdout.splitlines()[-1])
        assert (summary["tasks"], summary["attempts"], summary["errors"]) == (2, 2, 0)
        assert summary["model"] == "fake-model" and summary["steps"] == 4

        rows: list[dict[str, object]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the history sink inserts about every second
            passk = cli("analytics", "passk", "--run", "stack-run", "--format", "json", env=env)
            assert passk.returncode == 0, passk.stderr
            rows = json.loads(passk.stdout)
            if rows and rows[0].get("samples") == 4:
                break
            time.sleep(2)
        assert rows, "the eval run never reached the history"
        assert rows[0]["benchmark"] == "gsm8k" and rows[0]["model"] == "fake-model"
        assert (rows[0]["tasks"], rows[0]["samples"]) == (2, 4)
        assert float(rows[0]["pass_at_1"]) == summary["accuracy"]
    finally:
        down = cli("down", env=env)
        upstream.stop()
    assert down.returncode == 0, down.stderr
    assert not _port_open(gateway_port) and not _port_open(kafka_port)
    assert not list((tmp_path / "home" / "run").glob("*.pid"))
