"""``rllm-cli model swap`` says what a running stack serves: the model it was started with,
until it restarts on the new one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli


def _swap(home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RLLM_HOME", str(home))
    runner = CliRunner()
    for args in (
        ["--provider", "local"],
        ["--provider", "openai-compatible", "--model", "fake-model", "--base-url", "http://x/v1"],
    ):
        made = runner.invoke(cli, ["model", "setup", *args, "--no-input"])
        assert made.exit_code == 0, made.output
    swapped = runner.invoke(cli, ["model", "swap", "openai-compatible"])
    assert swapped.exit_code == 0, swapped.output
    return " ".join(swapped.output.split())


def test_swap_with_a_running_stack_says_it_serves_the_old_model_until_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "gateway.pid").write_text(str(os.getpid()))  # a live process
    out = _swap(tmp_path, monkeypatch)
    assert "active model: openai-compatible (openai-compatible, fake-model)" in out
    assert "the running stack still serves the model it was started with, not fake-model" in out
    assert "rllm-cli up --model openai-compatible" in out


def test_swap_without_a_stack_says_up_starts_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _swap(tmp_path, monkeypatch)
    assert "still serves" not in out
    assert "rllm-cli up starts the stack on it" in out
