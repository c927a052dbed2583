"""``mcq``: the chosen letter, extracted robustly from prose, against the gold letter."""

from __future__ import annotations

import re

from rllm.benchmarks.graders.common import final_answer, truth_of
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["extract_letter", "mcq"]

_L = r"\(?\**\(?([A-Za-z])\)?\**\)?"
_END = r"(?![A-Za-z0-9'])"
_PATTERNS = [
    # "The answer is (B)", "Answer: d", "final answer: **C**", "answer is option C"
    re.compile(r"answer\s*(?:is|:|=)?\s*(?:option|choice)?\s*[:\-]?\s*" + _L + _END, re.IGNORECASE),
    re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*([A-Za-z])\s*\}?\s*\}"),
    re.compile(r"\*\*\s*\(?([A-Z])\)?[.:)]?\s*\*\*"),
    re.compile(r"(?i:option|choice)\s+\(?([A-Z])\)?" + _END),
    re.compile(r"(?:^|\s)\(([A-Z])\)" + _END),
    re.compile(r"^\s*([A-Z])\s*[.:)]?\s*$", re.MULTILINE),
]


def extract_letter(text: str, valid: str = "ABCDEFGHIJ") -> str | None:
    """The option letter the text commits to (upper case), or None.

    The last match of the most explicit pattern wins: an "answer is/Answer:" phrase, then
    ``\\boxed{B}``, a bold letter, "option B", "(B)", and finally a line that is only a letter.
    """
    for pattern in _PATTERNS:
        hits = [h.upper() for h in pattern.findall(text) if h.upper() in valid]
        if pattern is _PATTERNS[0]:  # "answer is a ..." in prose must not read as option A
            hits = [
                h
                for m, h in zip(pattern.finditer(text), pattern.findall(text), strict=True)
                if not _article(m.group(0), h) and h.upper() in valid
            ]
            hits = [h.upper() for h in hits]
        if hits:
            return str(hits[-1])
    return None


def _article(match: str, letter: str) -> bool:
    """'answer is a prime' reads 'a' as an article, not option A: lower-case and unmarked."""
    return letter.islower() and not re.search(r"[:(*]", match)


@register_reward_fn("mcq")
def mcq(task: Task, answer: str) -> RewardResult:
    """1.0 when the letter the answer commits to is the gold letter.

    A gold that is not a single letter (an open question in a mixed set) is compared
    with the math grader, then as normalised text.
    """
    truth = truth_of(task)
    gold = str(truth[0] if isinstance(truth, list) else truth).strip()
    choices = task.metadata.get("choices") or []
    valid = "ABCDEFGHIJKLMNOP"[: len(choices)] if choices else "ABCDEFGHIJ"
    if len(gold) == 1 and gold.isalpha():
        got = extract_letter(answer, valid)
        if got is None and choices:  # the answer may quote the option's text instead
            said = final_answer(answer).strip().rstrip(".").lower()
            texts = [str(c).strip().rstrip(".").lower() for c in choices]
            got = valid[texts.index(said)] if said in texts else None
        ok = got == gold.upper()
        return RewardResult(1.0 if ok else 0.0, ok, metadata={"extracted": got, "gold": gold})
    from rllm.benchmarks.graders.maths import math_equal

    said = final_answer(answer)
    ok = _norm(said) == _norm(gold) or math_equal(gold, said)[0]
    return RewardResult(1.0 if ok else 0.0, ok, metadata={"extracted": said, "gold": gold})


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().rstrip(".")).lower()
