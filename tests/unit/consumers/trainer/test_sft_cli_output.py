"""``rllm-cli train sft``: a line per update on stderr while it trains, and a rerun of
a finished run says it is complete instead of "trained 0 update(s)"."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from rllm.cli.main import cli
from tests.unit.consumers.trainer.test_sft_data import _write

LINE = re.compile(
    r"sft c: update (\d+)/(\d+) · epoch (\d) · loss \d+\.\d{4} · (\d+) tokens · v(\d+)"
)


def test_sft_shows_each_update_and_a_finished_run_says_so(tmp_path: Path, tiny_model: Path) -> None:
    path = _write(tmp_path, ".jsonl")
    env = {"RLLM_BOOTSTRAP_SERVERS": None, "RLLM_LOSS": None}
    args = ["train", "sft", "--loss", "sft", "--data-file", str(path), "--model", str(tiny_model)]
    args += ["--run-id", "c", "--checkpoint-dir", str(tmp_path / "ck"), "--batch-size", "1"]
    first = CliRunner(env=env).invoke(cli, [*args, "--epochs", "2"])
    assert first.exit_code == 0, first.output
    assert first.stderr.startswith(f"sft c on {path}: loading the local backend ...\n")
    progress = [m.groups() for m in map(LINE.match, first.stderr.splitlines()) if m]
    # 2 sequences, one per update: 4 updates over 2 epochs, versions 1..4
    assert [(u, t, e, v) for u, t, e, _, v in progress] == [
        ("1", "4", "1", "1"),
        ("2", "4", "1", "2"),
        ("3", "4", "2", "3"),
        ("4", "4", "2", "4"),
    ]
    assert sum(int(n) for *_, n, _ in progress) == 18  # the epochs' 2 x 9 loss tokens
    assert "trained 4 update(s), 18 tokens; policy version 4" in first.stdout

    again = CliRunner(env=env).invoke(cli, [*args, "--epochs", "2"])
    assert again.exit_code == 0, again.output
    assert "run c is already complete: its checkpoint v4 trained all 2 epoch(s)" in again.stdout
    assert "use another --run-id" in again.stdout and "trained 0 update(s)" not in again.output
    assert not LINE.search(again.stderr)

    more = CliRunner(env=env).invoke(cli, [*args, "--epochs", "3"])
    assert more.exit_code == 0, more.output
    assert [m.group(1, 2, 3) for m in map(LINE.match, more.stderr.splitlines()) if m] == [
        ("1", "2", "3"),
        ("2", "2", "3"),
    ]
    assert "trained 2 update(s), 9 tokens; policy version 6" in more.stdout
