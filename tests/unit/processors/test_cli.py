"""``rllm-cli process``: flags map to ProcessorSettings; bad values are refused clearly."""

from __future__ import annotations

from click.testing import CliRunner

from rllm.cli.main import cli


def test_help_lists_the_replay_flags() -> None:
    result = CliRunner().invoke(cli, ["process", "--help"])
    assert result.exit_code == 0
    for flag in (
        "--replay",
        "--from-beginning",
        "--output-prefix",
        "--timeout",
        "--reward-wait",
        "--idle-timeout",
        "--group-timeout",
        "--estimator",
    ):
        assert flag in result.output


def test_bad_setting_is_refused_naming_the_flag() -> None:
    result = CliRunner().invoke(cli, ["process", "--reward-wait", "-1", "-b", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.output == (
        "error: invalid settings: --reward-wait: "
        "Input should be greater than or equal to 0 (got -1.0)\n"
    )
