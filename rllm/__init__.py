"""rllm-stream: train language agents with RL, as an event-sourced pipeline on Kafka.

The root exports the handful of names a user types; everything else lives in subpackages.
``rollout``, ``evaluator`` and ``AgentTrainer`` load on first use, so ``import rllm`` stays
light for processes that only handle events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rllm.schemas.types import EpisodeAssembled as Episode
from rllm.schemas.types import StepCaptured as Step
from rllm.schemas.types import TrajectoryAssembled as Trajectory

if TYPE_CHECKING:  # what ``__getattr__`` loads on first use, for mypy and pyright
    from rllm.app import AgentTrainer
    from rllm.producers.sdk.evaluator import evaluator
    from rllm.producers.sdk.rollout import rollout

__all__ = ["AgentTrainer", "Episode", "Step", "Trajectory", "__version__", "evaluator", "rollout"]
__version__ = "0.1.0"

_LAZY = {
    "rollout": ("rllm.producers.sdk.rollout", "rollout"),
    "evaluator": ("rllm.producers.sdk.evaluator", "evaluator"),
    "AgentTrainer": ("rllm.app", "AgentTrainer"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rllm' has no attribute {name!r}")
