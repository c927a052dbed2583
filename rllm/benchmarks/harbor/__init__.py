"""Harbor task directories (Terminal-Bench 2.0's format): parse and check a task folder,
a folder of them as a dataset, the verifier contract and the oracle run in a sandbox."""

from __future__ import annotations

from rllm.benchmarks.errors import RewardFileError
from rllm.benchmarks.harbor.check import TaskCheck, check_task, check_tasks
from rllm.benchmarks.harbor.config import HarborNetworkMode, TaskConfig, parse_size_mb
from rllm.benchmarks.harbor.dataset import (
    HarborDataset,
    from_task,
    load_dataset,
    task_dirs,
    to_task,
)
from rllm.benchmarks.harbor.task import HarborTask, HarborTaskError, load_task, sandbox_network
from rllm.benchmarks.harbor.verifier import VerifierResult, run_oracle, run_verifier

__all__ = [
    "HarborDataset",
    "HarborNetworkMode",
    "HarborTask",
    "HarborTaskError",
    "RewardFileError",
    "TaskCheck",
    "TaskConfig",
    "VerifierResult",
    "check_task",
    "check_tasks",
    "from_task",
    "load_dataset",
    "load_task",
    "parse_size_mb",
    "run_oracle",
    "run_verifier",
    "sandbox_network",
    "task_dirs",
    "to_task",
]
