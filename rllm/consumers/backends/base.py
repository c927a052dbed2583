"""What every training backend holds the same way: the trainer's settings and the policy
version its weights are at (0 until an update or a load)."""

from __future__ import annotations

from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import Capabilities

__all__ = ["BackendBase"]


class BackendBase:
    """Base of the ``TrainingBackend`` implementations; each sets ``name`` and
    ``capabilities`` and implements ``update``, ``save``, ``load`` and ``close``.

    Args:
        settings: the trainer's settings.
    """

    name: str
    capabilities: Capabilities

    def __init__(self, settings: TrainerSettings) -> None:
        self.settings = settings
        self._version = 0

    @property
    def version(self) -> int:
        """Current policy version."""
        return self._version

    @property
    def base_model(self) -> str:
        """The model the policy started from (``settings.model``)."""
        return self.settings.model
