"""The lesson of ``make demo-agent``: an agent learning small shell tasks through a harness.

Generated Harbor tasks (``rllm.benchmarks.harbor.generate``, family ``shell-basics``) are
run by a harness (``bash``: one command per model call) in sandboxes, each rollout one
gateway session of several model calls, rewarded by the task's verifier. Training and
the held-out evaluations use the same harness, sampled at temperature 1 and greedy.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rllm.app.config import TrainConfig
from rllm.app.rollouts import run_rollouts
from rllm.errors import ConfigError
from rllm.producers.evaluation import EvalSummary, summarize
from rllm.producers.sdk import Rollout
from rllm.schemas.types import Task

__all__ = ["HarnessLesson", "harness_lesson"]


@dataclass
class HarnessLesson:
    """Generated tasks and a harness to learn them with, in sandboxes of one backend."""

    name: str
    """``<family> with harness <name>``: what the demo's lines call the lesson."""
    train: list[Task]
    """The tasks trained on (the family's ``train`` split)."""
    test: list[Task]
    """The held-out tasks (the first ``held_out`` of its ``test`` split)."""
    rollout: Rollout
    """The harness sampling at the run's temperature (training)."""
    greedy: Rollout
    """The same harness sampling greedily (the evaluations)."""
    backend: Any
    """The sandbox backend (closed by ``close``)."""
    folder: Path
    """Where the tasks were written."""

    def evaluate(self, config: TrainConfig, run_id: str) -> EvalSummary:
        """The held-out tasks, one greedy attempt each, through the gateway, scored by their
        verifiers; with the policy version the gateway's upstream served."""
        from rllm.infra.admin_key import resolve_admin_key
        from rllm.producers.evaluation.served import served_policy
        from rllm.producers.harnesses import verifier_evaluator

        key = resolve_admin_key(config.admin_key)
        served = asyncio.run(served_policy(config.gateway_url, key))
        began = time.perf_counter()
        greedy = config.model_copy(update={"concurrency": len(self.test)})
        results = asyncio.run(
            run_rollouts(greedy, self.greedy, verifier_evaluator, self.test, 1, run_id)
        )
        summary = summarize(
            run_id, self.name, config.model, results, 1, time.perf_counter() - began
        )
        return replace(summary, policy_version=served.policy_version, policy_run=served.policy_run)

    def close(self) -> None:
        """Close the sandbox backend."""
        asyncio.run(self.backend.aclose())


def harness_lesson(
    *,
    harness: str,
    family: str,
    count: int,
    held_out: int,
    seed: int,
    max_turns: int,
    max_tokens: int,
    temperature: float,
    run_id: str,
    sandbox_backend: str | None = None,
    folder: Path | None = None,
) -> HarnessLesson:
    """Write ``count`` tasks of ``family`` (a temporary folder unless ``folder``) and make
    harness ``harness`` their rollout, ``max_turns`` model calls of at most ``max_tokens``
    each (the last ends the run: the verifier, not the word ``done``, says whether it
    solved the task), in sandboxes of ``sandbox_backend`` labelled with ``run_id``.

    Raises:
        ConfigError: a harness that is not one of the in-sandbox loops (``bash``,
            ``react``: their sampling is ours to set), or fewer held-out tasks than asked.
        HarborTaskError: an unknown family, or a task folder that does not load.
        SandboxUnavailableError: the backend cannot run here.
    """
    from rllm.benchmarks.harbor import load_dataset
    from rllm.benchmarks.harbor.generate import generate_family
    from rllm.producers.harnesses import HarnessRollout, get_harness
    from rllm.producers.harnesses.loop import LoopHarness
    from rllm.sandboxes import OWNER_LABEL, SandboxSettings, get_backend

    kind = type(get_harness(harness))
    if not issubclass(kind, LoopHarness):
        raise ConfigError(
            f"the agent demo sets each model call's sampling (temperature, max_tokens), which "
            f"only rllm's own loops take: use --agent bash or react, not {harness!r}"
        )
    where = folder or Path(tempfile.mkdtemp(prefix="rllm-demo-agent-"))
    split = generate_family(family, count, where, seed=seed)
    train = load_dataset(split.train, name=family)
    test = load_dataset(split.test, name=family)
    if train.errors or test.errors:
        raise ConfigError(f"generated tasks do not load: {[*train.errors, *test.errors][0]}")
    if held_out > len(test.tasks):
        raise ConfigError(
            f"held_out {held_out} is more than the {len(test.tasks)} held-out tasks of "
            f"{count} generated; generate more (tasks)"
        )
    backend = get_backend(sandbox_backend, SandboxSettings())
    labels = {OWNER_LABEL: run_id}

    def rollout(sampling: dict[str, Any]) -> Rollout:
        made = kind(
            max_turns=max_turns, command_timeout_s=30.0, sampling=sampling, turn_limit_ends=True
        )
        return HarnessRollout(made, backend, labels=labels)

    return HarnessLesson(
        name=f"{family} with harness {harness}",
        train=train.rows(),
        test=test.rows()[:held_out],
        rollout=rollout({"temperature": temperature, "max_tokens": max_tokens}),
        greedy=rollout({"temperature": 0.0, "max_tokens": max_tokens}),
        backend=backend,
        folder=where,
    )
