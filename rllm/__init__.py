"""rllm-stream: train language agents with RL, as an event-sourced pipeline on Kafka.

The root exports the handful of names a user types; everything else lives in subpackages.
"""

from __future__ import annotations

from rllm.schemas.types import EpisodeAssembled as Episode
from rllm.schemas.types import StepCaptured as Step
from rllm.schemas.types import TrajectoryAssembled as Trajectory

__all__ = ["Episode", "Step", "Trajectory", "__version__"]
__version__ = "0.1.0"
