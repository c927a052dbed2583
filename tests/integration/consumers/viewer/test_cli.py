"""``rllm-cli view`` over a chDB directory with no history service: each page opens the
directory and lets it go, so ``rllm-cli analytics`` (or ``rllm-cli history``) still opens
it while the viewer runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner

from rllm.cli.main import cli
from tests.fakes.server import free_port
from tests.integration.consumers.viewer.process import view_process


def test_view_reads_a_chdb_directory_it_does_not_hold(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "RLLM_HOME": str(tmp_path / "home")}
    env.pop("RLLM_CLICKHOUSE_URL", None)
    history = tmp_path / "history"
    view = view_process(port, env, tmp_path / "view.log", "--history-dir", str(history))
    with view as url:
        for _ in range(2):
            page = httpx.get(url + "/", timeout=60)
            assert page.status_code == 200
            assert "The history is empty" in page.text and str(history) in page.text
        missing = httpx.get(f"{url}/runs/r-1", timeout=60)
        assert missing.status_code == 404 and "no run &#39;r-1&#39; in the history" in missing.text
        other = subprocess.run(
            [
                sys.executable,
                "-m",
                "rllm.cli",
                "analytics",
                "runs",
                "--history-dir",
                str(history),
                "--format",
                "json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode == 0, other.stderr  # the viewer did not keep the directory
        assert other.stdout.strip() == "[]"
        wrong_host = httpx.get(url + "/", headers={"Host": "rebound.example"}, timeout=10)
        assert wrong_host.status_code == 400
        again = CliRunner().invoke(
            cli, ["view", "--port", str(port), "--history-dir", str(history)]
        )
        assert (again.exit_code, again.output) == (0, f"view: the viewer is already at {url}\n")
    said = (tmp_path / "view.log").read_text()
    assert f"view: {url} over the history in {history} (read-only)" in said


def test_view_on_a_port_another_program_holds_says_so(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        flags = ["view", "--port", str(port), "--history-dir", str(tmp_path / "history")]
        result = CliRunner().invoke(cli, flags)
    assert result.exit_code != 0
    assert (
        f"port {port} on 127.0.0.1 is held by another program (not an rllm viewer): choose "
        "another with --port or RLLM_VIEW_PORT"
    ) in " ".join(result.output.split())
