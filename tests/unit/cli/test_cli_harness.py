"""``rllm-cli harness list|install``: every registered harness with its version, API and
install state; installing one on the host; a harness without a host install counts as
installed; an unknown name is a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.producers.harnesses import HARNESSES, harness_names


class HostHarness:
    """A harness with a host install: a marker file under its home."""

    name = "host-fake"
    version = "0.1.2"
    api = "responses"

    def is_installed(self, home: Path) -> bool:
        return (home / "host-fake" / "done").is_file()

    async def install(self, home: Path) -> None:
        (home / "host-fake").mkdir(parents=True, exist_ok=True)
        (home / "host-fake" / "done").write_text("ok")


class BareHarness:
    """A harness from before ``is_installed`` and ``install``: counts as installed."""

    name = "bare-fake"
    version = "7"
    api = "anthropic"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLLM_HARNESS_HOME", str(tmp_path / "harnesses"))
    monkeypatch.setitem(HARNESSES, "host-fake", f"{__name__}:HostHarness")
    monkeypatch.setitem(HARNESSES, "bare-fake", f"{__name__}:BareHarness")
    monkeypatch.setitem(HARNESSES, "broken-fake", f"{__name__}:Missing")
    return tmp_path / "harnesses"


def _rows() -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["harness", "list", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return {row["name"]: row for row in rows}


def test_list_shows_every_harness_with_version_api_and_install_state(home: Path) -> None:
    rows = _rows()
    assert sorted(rows) == harness_names()  # every registered one, sorted, the fakes too
    assert {k: rows["oracle"][k] for k in ("version", "api", "installed")} == {
        "version": "1",
        "api": "none",
        "installed": True,
    }
    assert (rows["bash"]["api"], rows["bash"]["installed"]) == ("openai-chat", True)
    assert (rows["react"]["api"], rows["react"]["installed"]) == ("openai-chat", True)
    assert rows["host-fake"] == {
        "name": "host-fake",
        "version": "0.1.2",
        "api": "responses",
        "installed": False,
        "error": None,
    }
    assert (rows["bare-fake"]["installed"], rows["bare-fake"]["version"]) == (True, "7")
    broken = rows["broken-fake"]
    assert broken["installed"] is False and "Missing" in broken["error"]

    table = CliRunner().invoke(cli, ["harness", "list"], catch_exceptions=False)
    assert table.exit_code == 0
    for name in ("oracle", "bash", "react", "host-fake", "0.1.2", "responses"):
        assert name in table.stdout


def test_install_puts_a_harness_under_its_home_and_list_sees_it(home: Path) -> None:
    result = CliRunner().invoke(cli, ["harness", "install", "host-fake"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "installed harness 'host-fake' 0.1.2" in result.stdout and str(home) in result.stdout
    assert (home / "host-fake" / "done").read_text() == "ok"
    assert _rows()["host-fake"]["installed"] is True

    bare = CliRunner().invoke(cli, ["harness", "install", "bare-fake"], catch_exceptions=False)
    assert bare.exit_code == 0 and "needs no host install" in bare.stdout


def test_install_of_an_unknown_harness_names_it_and_the_known_ones(home: Path) -> None:
    result = CliRunner().invoke(cli, ["harness", "install", "claude-codex"])
    assert result.exit_code == 1
    assert "unknown harness 'claude-codex'" in result.stderr and "oracle" in result.stderr
