"""Stream processors: assemble trajectories, attach rewards, group episodes (faust)."""

from __future__ import annotations

from rllm.processors.advantages import (
    compute_advantages,
    grpo_advantages,
    is_uniform,
    reinforce_advantages,
    rloo_advantages,
)
from rllm.processors.app import Processors
from rllm.processors.assemble import assemble_trajectory
from rllm.processors.errors import AssemblyError, ProcessorError
from rllm.processors.group import build_episode
from rllm.processors.score import RewardRunner, extract_answer
from rllm.processors.settings import ProcessorSettings
from rllm.processors.worker import run_processors
from rllm.schemas.ids import dedup_by_event_id, episode_id, trajectory_id

__all__ = [
    "AssemblyError",
    "ProcessorError",
    "ProcessorSettings",
    "Processors",
    "RewardRunner",
    "assemble_trajectory",
    "build_episode",
    "compute_advantages",
    "dedup_by_event_id",
    "episode_id",
    "extract_answer",
    "grpo_advantages",
    "is_uniform",
    "reinforce_advantages",
    "rloo_advantages",
    "run_processors",
    "trajectory_id",
]
