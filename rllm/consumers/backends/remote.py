"""What the hosted backends (``tinker``, ``fireworks``) share: their capabilities, the
refusal of a missing setting, the policy version, and the record of the service-side
checkpoint in the local checkpoint directory. Each calls its service through the service's
own SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rllm.consumers.backends.base import BackendBase
from rllm.consumers.trainer.types import Capabilities, LossAgg, LossKind
from rllm.errors import ConfigError

__all__ = ["RemoteBackend", "missing", "remote_capabilities"]


def remote_capabilities(losses: frozenset[LossKind], loss_aggs: frozenset[LossAgg]) -> Capabilities:
    """A hosted service's capabilities: LoRA only, no KL penalty, no clip range to set."""
    return Capabilities(
        losses=losses,
        loss_aggs=loss_aggs,
        kl=False,
        clipping=False,
        lora=True,
        full_finetune=False,
    )


def missing(backend: str, what: str) -> ConfigError:
    """The error refusing a backend that lacks ``what`` (say how to give it)."""
    return ConfigError(f"backend {backend!r} needs {what}")


class RemoteBackend(BackendBase):
    """Base of the backends whose weights live on a service (``settings.model`` is the
    service's base model); subclasses set ``name`` and ``capabilities`` and implement
    ``update``, ``save`` and ``load``."""

    def _write_record(self, directory: Path, record: dict[str, str]) -> None:
        """Record where the service keeps this checkpoint, in ``directory/<name>.json``."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{self.name}.json").write_text(json.dumps(record))

    def _read_record(self, directory: Path) -> dict[str, Any]:
        """The record ``_write_record`` left in ``directory``."""
        record: dict[str, Any] = json.loads((directory / f"{self.name}.json").read_text())
        return record
