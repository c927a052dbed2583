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

__all__ = ["CheckpointState", "CheckpointStore"]


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
