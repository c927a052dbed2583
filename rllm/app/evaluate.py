"""``evaluate``: ``rllm-cli eval`` on a policy of the user's choice (``--policy``): the
stack serves it for the eval (``rllm.app.hold``), then the policy it served before."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from rllm.app.hold import served_for
from rllm.app.policy import parse_policy
from rllm.infra.admin_key import resolve_admin_key
from rllm.producers.evaluation import EvalConfig, EvalSummary, run_eval
from rllm.producers.evaluation.progress import say
from rllm.producers.evaluation.runner import Progress
from rllm.settings import KafkaSettings

__all__ = ["evaluate"]


def evaluate(
    config: EvalConfig,
    policy: str | None = None,
    kafka: KafkaSettings | None = None,
    progress: Progress | None = None,
    on_tasks: Callable[[int], None] | None = None,
) -> EvalSummary:
    """Run ``config`` (``run_eval``) on ``policy``: ``base``, ``latest`` or ``RUN:VERSION``;
    None: whatever the stack serves now, without reading Kafka. The run's first line and
    its summary name the policy that answered.

    Raises:
        ConfigError: a bad ``policy``, one that names nothing that can be served, or a run
            training against the stack (before any rollout); ``run_eval``'s refusals.
        RllmError: the gateway did not serve the policy (its reason).
    """
    if policy is None:
        return asyncio.run(run_eval(config, progress, on_tasks))
    config = replace(config, policy=policy)
    choice = parse_policy(policy)
    key = resolve_admin_key(config.admin_key)
    with served_for(choice, kafka or KafkaSettings(), config.gateway_url, key, say=say):
        return asyncio.run(run_eval(config, progress, on_tasks))
