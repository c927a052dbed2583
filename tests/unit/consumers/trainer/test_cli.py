"""``rllm-cli train consume`` refuses what the backend cannot honour before touching Kafka."""

from __future__ import annotations

from click.testing import CliRunner

from rllm.cli.main import cli


def test_train_refuses_lora_on_local_backend_before_starting() -> None:
    result = CliRunner().invoke(
        cli, ["train", "consume", "--backend", "local", "--lora-rank", "8", "-b", "127.0.0.1:1"]
    )
    assert result.exit_code == 1
    assert "backend 'local' cannot honour" in result.output and "lora_rank=8" in result.output


def test_train_and_serve_are_registered() -> None:
    runner = CliRunner()
    assert "--backend" in runner.invoke(cli, ["train", "--help"]).output
    assert "--follow-run-id" in runner.invoke(cli, ["serve", "--help"]).output
