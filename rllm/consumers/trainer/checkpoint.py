"""Checkpoints that carry the consumer offsets they consumed.

A checkpoint is ``<dir>/<run_id>/v<version>/``: the backend's weights plus ``state.json``
with the policy version, the next offset of every partition of ``rllm.episodes`` that the
weights have consumed, and the episode ids trained per version. It is written to a
temporary directory and renamed; ``LATEST`` is then replaced atomically. On restart the
trainer loads ``LATEST`` and seeks to its offsets, so offsets are committed together with
the checkpoint that consumed them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rllm.consumers.trainer.errors import CheckpointError

__all__ = [
    "CheckpointState",
    "CheckpointStore",
    "RunCheckpoints",
    "list_checkpoints",
    "prune_checkpoints",
]


@dataclass
class CheckpointState:
    """What the trainer needs to resume exactly where the weights are."""

    version: int = 0
    """Policy version of the weights."""
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    """topic -> partition (as str) -> next offset to consume."""
    history: list[dict[str, object]] = field(default_factory=list)
    """One entry per update: version and the episode ids it trained on."""
    checkpoint_uri: str = ""
    """URI of the weights."""
    run_id: str = ""
    """Training run."""
    base_model: str = ""
    """Model the policy started from."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Metrics of the last update."""

    def trained_episode_ids(self) -> list[str]:
        """Every episode id trained on, in update order."""
        out: list[str] = []
        for h in self.history:
            ids = h.get("episode_ids", [])
            out += [str(x) for x in ids] if isinstance(ids, list) else []
        return out


class CheckpointStore:
    """Reads and writes checkpoints of one run under ``root``."""

    def __init__(self, root: Path, run_id: str, keep: int = 2) -> None:
        self.dir = root / run_id
        self.keep = keep

    @property
    def latest_file(self) -> Path:
        """The pointer file naming the newest complete checkpoint."""
        return self.dir / "LATEST"

    def latest(self) -> tuple[Path, CheckpointState] | None:
        """The newest complete checkpoint, or None on a fresh run."""
        if not self.latest_file.is_file():
            return None
        path = self.dir / self.latest_file.read_text().strip()
        try:
            raw = json.loads((path / "state.json").read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(
                f"checkpoint {path} named by {self.latest_file} is unreadable: {exc}"
            ) from exc
        return path, CheckpointState(**raw)

    def write(self, state: CheckpointState, save_weights: Callable[[Path], str]) -> Path:
        """Write weights (via ``save_weights(tmp_dir) -> uri``) and state atomically."""
        name = f"v{state.version:06d}"
        final = self.dir / name
        tmp = self.dir / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_weights(tmp)
        state.checkpoint_uri = final.resolve().as_uri()
        (tmp / "state.json").write_text(json.dumps(asdict(state), indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer = self.dir / ".LATEST.tmp"
        pointer.write_text(name)
        os.replace(pointer, self.latest_file)
        self._prune(keep_name=name)
        return final

    def _prune(self, keep_name: str) -> None:
        names = sorted(p.name for p in self.dir.glob("v*") if p.is_dir())
        for old in names[: -self.keep]:
            if old != keep_name:
                shutil.rmtree(self.dir / old, ignore_errors=True)


@dataclass(frozen=True)
class RunCheckpoints:
    """The checkpoints one run keeps under a checkpoint root."""

    run_id: str
    """The run (its folder's name)."""
    versions: tuple[int, ...]
    """Complete checkpoints, oldest first."""
    latest: int | None
    """The version ``LATEST`` names: the one its committed offsets resume from."""
    bytes_by_version: dict[int, int]
    """Size on disk of each."""

    @property
    def total_bytes(self) -> int:
        """Their size together."""
        return sum(self.bytes_by_version.values())


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def list_checkpoints(root: Path) -> list[RunCheckpoints]:
    """Every run with checkpoints under ``root`` (``<root>/<run>/v<version>/``), by run id."""
    runs = []
    for folder in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        versions = sorted(
            int(p.name[1:])
            for p in folder.glob("v*")
            if p.is_dir() and p.name[1:].isdigit() and (p / "state.json").is_file()
        )
        if not versions:
            continue
        pointer = folder / "LATEST"
        name = pointer.read_text().strip() if pointer.is_file() else ""
        latest = int(name[1:]) if name[1:].isdigit() else None
        sizes = {v: _size(folder / f"v{v:06d}") for v in versions}
        runs.append(RunCheckpoints(folder.name, tuple(versions), latest, sizes))
    return runs


def prune_checkpoints(
    root: Path,
    keep: int,
    run_id: str | None = None,
    protect: set[tuple[str, int]] | None = None,
    dry_run: bool = False,
) -> list[tuple[str, int, int]]:
    """Delete all but the newest ``keep`` checkpoints of each run (or of ``run_id``); never
    the one ``LATEST`` names (its offsets are the run's resume point) nor any ``(run,
    version)`` in ``protect`` (the policy a model server serves). Returns ``(run, version,
    bytes)`` of each deleted one (or of each that would be, with ``dry_run``).

    Raises:
        CheckpointError: ``keep`` is below 1, or ``run_id`` has no checkpoints here.
    """
    if keep < 1:
        raise CheckpointError(f"keep must be at least 1 checkpoint per run, not {keep}")
    runs = list_checkpoints(root)
    if run_id is not None:
        runs = [r for r in runs if r.run_id == run_id]
        if not runs:
            raise CheckpointError(f"run {run_id!r} has no checkpoints under {root}")
    kept = protect or set()
    deleted = []
    for run in runs:
        for version in run.versions[:-keep]:
            if version == run.latest or (run.run_id, version) in kept:
                continue
            deleted.append((run.run_id, version, run.bytes_by_version[version]))
            if not dry_run:
                shutil.rmtree(root / run.run_id / f"v{version:06d}")
    return deleted
