"""``f1`` and ``em``: SQuAD-style normalised token F1 and exact match, best over the golds."""

from __future__ import annotations

import re
import string
from collections import Counter

from rllm.benchmarks.graders.common import final_answer, gold_list
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["em", "f1", "normalize_answer", "token_f1"]

_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, the articles a/an/the, and extra white space (SQuAD)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 of the normalised strings."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def _scores(task: Task, answer: str) -> tuple[float, float, str]:
    said = final_answer(answer)
    golds = gold_list(task)
    exact = max(float(normalize_answer(said) == normalize_answer(g)) for g in golds)
    best_f1 = max(token_f1(said, g) for g in golds)
    return exact, best_f1, said


@register_reward_fn("em")
def em(task: Task, answer: str) -> RewardResult:
    """1.0 when the final answer equals any gold after SQuAD normalisation."""
    exact, best_f1, said = _scores(task, answer)
    return RewardResult(
        exact, exact == 1.0, signals={"em": exact, "f1": best_f1}, metadata={"extracted": said}
    )


@register_reward_fn("f1")
def f1(task: Task, answer: str) -> RewardResult:
    """Best token F1 over the golds; correct when it is an exact match."""
    exact, best_f1, said = _scores(task, answer)
    return RewardResult(
        best_f1, exact == 1.0, signals={"em": exact, "f1": best_f1}, metadata={"extracted": said}
    )
