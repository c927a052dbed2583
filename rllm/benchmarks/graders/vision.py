"""Graders of the vision-language benchmarks: relaxed accuracy, ANLS, VQA accuracy, OCRBench."""

from __future__ import annotations

import re

from rllm.benchmarks.graders.common import final_answer, gold_list
from rllm.benchmarks.graders.qa import normalize_answer
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["anls", "levenshtein", "ocrbench", "relaxed_accuracy", "relaxed_match", "vqa_accuracy"]


def _number(text: str) -> float | None:
    text = text.strip().rstrip(".").replace(",", "").replace("$", "")
    percent = text.endswith("%")
    try:
        value = float(text.rstrip("%").strip())
    except ValueError:
        return None
    return value / 100 if percent else value


def relaxed_match(prediction: str, gold: str, tolerance: float = 0.05) -> bool:
    """ChartQA: numbers within ``tolerance`` relative error; other answers exactly (no case)."""
    p, g = _number(prediction), _number(gold)
    if p is not None and g is not None:
        return p == g if g == 0 else abs(p - g) / abs(g) <= tolerance
    return prediction.strip().rstrip(".").lower() == gold.strip().rstrip(".").lower()


@register_reward_fn("relaxed_accuracy")
def relaxed_accuracy(task: Task, answer: str) -> RewardResult:
    """1.0 when the final answer relaxed-matches any gold (ChartQA)."""
    said = final_answer(answer)
    ok = any(relaxed_match(said, g) for g in gold_list(task))
    return RewardResult(1.0 if ok else 0.0, ok, metadata={"extracted": said})


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@register_reward_fn("anls")
def anls(task: Task, answer: str, threshold: float = 0.5) -> RewardResult:
    """Average normalised Levenshtein similarity (DocVQA): best over golds, 0 under 0.5."""
    said = " ".join(final_answer(answer).lower().split())
    best = 0.0
    for gold in gold_list(task):
        g = " ".join(gold.lower().split())
        distance = levenshtein(said, g) / max(len(said), len(g), 1)
        best = max(best, 1 - distance)
    score = best if best >= threshold else 0.0
    return RewardResult(score, score == 1.0, signals={"anls": score}, metadata={"extracted": said})


@register_reward_fn("vqa_accuracy")
def vqa_accuracy(task: Task, answer: str) -> RewardResult:
    """VQA accuracy: min(#annotators who gave the answer / 3, 1) (TextVQA)."""
    said = normalize_answer(final_answer(answer))
    matches = sum(normalize_answer(g) == said for g in gold_list(task))
    score = min(matches / 3, 1.0)
    return RewardResult(score, matches > 0, metadata={"extracted": said})


@register_reward_fn("ocrbench")
def ocrbench(task: Task, answer: str) -> RewardResult:
    """OCRBench: correct when the reply contains a reference answer (case-insensitive;
    spaces ignored for handwritten-formula items)."""
    formula = task.metadata.get("dataset") == "HME100k"

    def norm(text: str) -> str:
        text = text.strip().lower()
        return re.sub(r"\s+", "", text) if formula else text

    reply = norm(answer)
    ok = any(norm(g) and norm(g) in reply for g in gold_list(task))
    return RewardResult(1.0 if ok else 0.0, ok)
