"""Checkpoints on disk: listed per run with sizes, pruned to the newest K, never the one
LATEST names (the resume point of the committed offsets) nor the one a server serves."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.consumers.trainer.checkpoint import (
    CheckpointState,
    CheckpointStore,
    list_checkpoints,
    prune_checkpoints,
)
from rllm.consumers.trainer.errors import CheckpointError


def _write(root: Path, run: str, versions: list[int], latest: int | None = None) -> None:
    store = CheckpointStore(root, run, keep=100)
    for v in versions:
        store.write(CheckpointState(version=v, run_id=run), lambda d, v=v: _weights(d, v))
    if latest is not None:
        (root / run / "LATEST").write_text(f"v{latest:06d}")


def _weights(folder: Path, version: int) -> str:
    (folder / "model.safetensors").write_bytes(b"w" * (1000 * (version + 1)))
    return str(folder)


def test_runs_are_listed_with_their_versions_latest_and_size(tmp_path: Path) -> None:
    _write(tmp_path, "run-a", [0, 1, 2])
    _write(tmp_path, "run-b", [0, 1], latest=0)
    (tmp_path / "run-a" / ".v000003.tmp").mkdir()  # a half-written one is not a checkpoint
    a, b = list_checkpoints(tmp_path)
    assert (a.run_id, a.versions, a.latest) == ("run-a", (0, 1, 2), 2)
    assert (b.run_id, b.versions, b.latest) == ("run-b", (0, 1), 0)
    assert a.bytes_by_version[2] > a.bytes_by_version[0] > 1000
    assert list_checkpoints(tmp_path / "missing") == []


def test_prune_keeps_the_newest_latest_and_served(tmp_path: Path) -> None:
    _write(tmp_path, "run-a", [0, 1, 2, 3])
    _write(tmp_path, "run-b", [0, 1, 2], latest=0)
    plan = prune_checkpoints(tmp_path, keep=1, dry_run=True, protect={("run-a", 1)})
    assert [(r, v) for r, v, _ in plan] == [("run-a", 0), ("run-a", 2), ("run-b", 1)]
    assert [r.versions for r in list_checkpoints(tmp_path)] == [(0, 1, 2, 3), (0, 1, 2)]
    prune_checkpoints(tmp_path, keep=1, protect={("run-a", 1)})
    assert [r.versions for r in list_checkpoints(tmp_path)] == [(1, 3), (0, 2)]
    with pytest.raises(CheckpointError, match="keep must be at least 1 checkpoint per run, not 0"):
        prune_checkpoints(tmp_path, keep=0)
    with pytest.raises(CheckpointError, match="run 'nope' has no checkpoints under"):
        prune_checkpoints(tmp_path, keep=1, run_id="nope")


def test_the_cli_lists_and_prunes(tmp_path: Path) -> None:
    _write(tmp_path, "run-a", [0, 1, 2])
    runner = CliRunner()
    listed = runner.invoke(cli, ["checkpoints", "ls", "--dir", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert "run-a  v0, v1, v2 (latest)" in listed.output and "1 run(s)" in listed.output
    pruned = runner.invoke(
        cli,
        [
            "checkpoints",
            "prune",
            "--dir",
            str(tmp_path),
            "--keep",
            "2",
            "--serve-url",
            "http://127.0.0.1:9",
        ],
    )
    assert pruned.exit_code == 0, pruned.output
    assert "deleted run-a v0" in pruned.output and "deleted 1 checkpoint(s)" in pruned.output
    assert list_checkpoints(tmp_path)[0].versions == (1, 2)
