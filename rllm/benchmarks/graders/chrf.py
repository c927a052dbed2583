"""``chrf``: sentence chrF of the translation against the reference(s), via sacrebleu."""

from __future__ import annotations

from rllm.benchmarks.graders.common import gold_list
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["chrf"]


@register_reward_fn("chrf")
def chrf(task: Task, answer: str) -> RewardResult:
    """chrF / 100 in [0, 1]; ``is_correct`` is None (a score, not a verdict)."""
    from sacrebleu.metrics.chrf import CHRF

    score = CHRF().sentence_score(answer.strip(), gold_list(task)).score / 100.0
    return RewardResult(score, None, signals={"chrf": score})
