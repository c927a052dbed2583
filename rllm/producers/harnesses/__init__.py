"""Command-line agents (harnesses) run in a Harbor task's sandbox through the gateway:
the ``Harness`` contract (its optional parts, ``CallsModel``, ``InstallsOnHost`` and
``UploadsTaskFiles``, in ``types``), the registry, the one runner, and the rollout that
makes a harness an ``@rllm.rollout``."""

from __future__ import annotations

from rllm.producers.harnesses.errors import HarnessError, UnknownHarnessError
from rllm.producers.harnesses.registry import HARNESSES, get_harness, harness_names
from rllm.producers.harnesses.rollout import (
    VERIFIER_EVALUATOR,
    HarnessRollout,
    reward_event,
    verifier_evaluator,
)
from rllm.producers.harnesses.runner import HarnessRunner
from rllm.producers.harnesses.types import (
    AgentSetup,
    CloseReason,
    Harness,
    HarnessApi,
    HarnessBase,
    HarnessRun,
    ModelEndpoint,
)

__all__ = [
    "HARNESSES",
    "VERIFIER_EVALUATOR",
    "AgentSetup",
    "CloseReason",
    "Harness",
    "HarnessApi",
    "HarnessBase",
    "HarnessError",
    "HarnessRollout",
    "HarnessRun",
    "HarnessRunner",
    "ModelEndpoint",
    "UnknownHarnessError",
    "get_harness",
    "harness_names",
    "reward_event",
    "verifier_evaluator",
]
