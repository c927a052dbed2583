"""A harness as an ``@rllm.rollout``: ``HarnessRollout`` is a ``Rollout`` whose session
wraps a ``HarnessRunner`` run, so ``run_tasks``, ``rllm-cli eval`` and ``AgentTrainer``
run and train a harness exactly as they do the built-in agents.

The session closes with ``ok``, ``timeout`` or ``error``; ``SessionClosed.error`` starts
with the reason (``timeout``, ``agent_error``, ``verifier_error``, ``sandbox_error``) and
the output carries it as ``reason``. The verifier's reward goes with the close as a
``RewardAssigned`` (its named values as signals), ahead of ``SessionClosed``; a failed
verification publishes none. The session's lifecycle (open, close, token totals) is
``Rollout.run``'s; this module supplies only the attempt.
"""

from __future__ import annotations

import json
from typing import Any, Unpack

from rllm.benchmarks.harbor.dataset import from_task
from rllm.benchmarks.types import RewardResult
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.runner import HarnessRunner, RunnerOptions
from rllm.producers.harnesses.types import CloseReason, Harness, HarnessRun, ModelEndpoint
from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.evaluator import Evaluator
from rllm.producers.sdk.rollout import Rollout
from rllm.producers.sdk.types import Attempt, RolloutConfig, RolloutOutcome
from rllm.sandboxes.types import SandboxBackend
from rllm.schemas.envelope import envelope
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus, Task

__all__ = ["VERIFIER_EVALUATOR", "HarnessRollout", "reward_event", "verifier_evaluator"]

VERIFIER_EVALUATOR = "harbor-verifier"
"""``RewardAssigned.evaluator`` of a verifier's reward."""

_STATUS = {CloseReason.OK: SessionStatus.OK, CloseReason.TIMEOUT: SessionStatus.TIMEOUT}


def reward_event(session_id: str, run_id: str, result: HarnessRun) -> SessionEvent | None:
    """The RewardAssigned of a run whose verifier gave a reward; None when it gave none
    (a failed verification is never a silent 0)."""
    verifier, reward = result.verifier, result.reward
    if verifier is None or reward is None:
        return None
    details = {
        "harness": result.harness,
        "task": result.task,
        "reason": result.reason.value,
        "exit_code": verifier.exit_code,
        "duration_s": round(verifier.duration_s, 3),
    }
    payload = RewardAssigned(
        reward=reward,
        is_correct=reward >= 1.0,
        signals=dict(verifier.values),
        evaluator=VERIFIER_EVALUATOR,
        metadata_json=json.dumps(details),
    )
    return envelope(session_id, run_id, "harness", payload)


def _verifier_score(task: Task, outcome: RolloutOutcome) -> RewardResult:
    output = outcome.output if isinstance(outcome.output, dict) else {}
    reward = output.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        why = output.get("verifier_error") or outcome.error or "it did not run"
        raise HarnessError(f"task {task.task_id!r}: the verifier gave no reward: {why}")
    details = {k: output.get(k) for k in ("harness", "task", "reason")}
    return RewardResult(
        reward=float(reward),
        is_correct=reward >= 1.0,
        signals=dict(output.get("values") or {}),
        metadata=details,
    )


verifier_evaluator = Evaluator(_verifier_score, name=VERIFIER_EVALUATOR)
"""The verifier's reward as an ``@rllm.evaluator``: give it to ``run_tasks`` or
``AgentTrainer`` and their results carry the reward; the rollout then publishes it once
(the evaluator's), not twice."""


class HarnessRollout(Rollout):
    """A harness on Harbor tasks (``Task`` rows from ``rllm.benchmarks.harbor.to_task``).

    Args:
        harness: the agent.
        backend: where its sandboxes come from.
        options: its ``HarnessRunner``'s (``artifacts_dir``: where its log files are kept,
            ``<dir>/<session_id>/``; ``labels``: on every sandbox, ``rllm.owner``).
    """

    def __init__(
        self, harness: Harness, backend: SandboxBackend, **options: Unpack[RunnerOptions]
    ) -> None:
        self.harness = harness
        self.runner = HarnessRunner(harness, backend, **options)
        self._gateway_url = ""
        super().__init__(self._agent, name=f"harness:{harness.name}")

    def session_metadata(self) -> dict[str, Any]:
        """The harness's name and version, on ``SessionOpened``."""
        return {"harness": self.harness.name, "harness_version": self.harness.version}

    async def _agent(self, task: Task, config: RolloutConfig) -> dict[str, Any]:
        """The harness on ``task`` in the session of ``config`` (its summary)."""
        return (await self._execute(task, config.base_url, config)).summary()

    async def attempt(self, task: Task, config: RolloutConfig, gateway: GatewayClient) -> Attempt:
        """Run the harness in its sandbox and verify; the verifier's reward goes with the
        close (``Rollout.run`` closes the session, with the gateway's token totals).
        ``config.sampling`` is not passed on: a CLI agent picks its own."""
        result = await self._execute(task, gateway.url, config)
        error = None if result.reason is CloseReason.OK else f"{result.reason}: {result.error}"
        return Attempt(
            _STATUS.get(result.reason, SessionStatus.ERROR),
            output=result.summary(),
            error=error,
            reward=reward_event(config.session_id, config.run_id, result),
        )

    async def _execute(self, task: Task, gateway_url: str, config: RolloutConfig) -> HarnessRun:
        try:
            harbor_task = from_task(task)
        except Exception as exc:  # not a Harbor task, or its folder no longer loads
            return HarnessRun(
                harness=self.harness.name,
                task=task.task_id,
                reason=CloseReason.SANDBOX_ERROR,
                error=str(exc),
            )
        try:
            endpoint = ModelEndpoint(config.base_url, config.api_key, config.model)
            return await self.runner.run(
                harbor_task,
                gateway_url=gateway_url,
                endpoint=endpoint,
                session_id=config.session_id,
            )
        except Exception as exc:  # the sandbox died mid-run: this run's result, not a crash
            return HarnessRun(
                self.harness.name,
                task.task_id,
                reason=CloseReason.SANDBOX_ERROR,
                error=f"{type(exc).__name__}: {exc}",
            )
