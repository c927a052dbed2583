"""``math``: final answers compared symbolically with math-verify; ``countdown`` equations."""

from __future__ import annotations

import ast
import logging
import operator
import re
import threading
from collections import Counter
from typing import Any

from rllm.benchmarks.graders.common import gold_list, truth_of
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["countdown", "math_equal", "math_reward"]

# Off the main thread the timeouts are off by design; math-verify logs that on every call.
logging.getLogger("math_verify").setLevel(logging.ERROR)


_TIMEOUT_S = 30
"""math-verify's own default is 5 s, which a loaded machine's first parse (sympy's lazy
set-up) can pass; a runaway expression still stops."""


def _timeout_s() -> int | None:
    """The timeout for math-verify's ``parse`` and ``verify``: it times out with SIGALRM,
    which only the main thread may use, so off the main thread there is none."""
    return _TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def _parse_gold(text: str) -> list[Any]:
    from math_verify import parse  # type: ignore[import-untyped,unused-ignore]  # no stubs

    text = text.strip()
    wrapped = text if "$" in text or "\\boxed" in text else f"${text}$"
    parsed = parse(wrapped, parsing_timeout=_timeout_s())
    return list(parsed) if parsed else list(parse(text, parsing_timeout=_timeout_s()))


def math_equal(gold: str, answer: str) -> tuple[bool, str]:
    """Whether ``answer`` states the same value as ``gold``; also the extracted answer."""
    from math_verify import parse, verify  # type: ignore[import-untyped,unused-ignore]  # no stubs

    gold_parsed = _parse_gold(gold)
    pred = parse(answer, parsing_timeout=_timeout_s())
    extracted = str(pred[-1]) if pred else ""
    if not gold_parsed or not pred:
        same = bool(gold.strip()) and _plain(gold) == _plain(extracted or answer)
        return same, extracted
    return bool(verify(gold_parsed, pred, timeout_seconds=_timeout_s())), extracted


def _plain(text: str) -> str:
    return re.sub(r"[\s$]", "", text).rstrip(".").lower()


@register_reward_fn("math")
def math_reward(task: Task, answer: str) -> RewardResult:
    """1.0 when the answer's final value equals a ground truth (boxed or plain, any form)."""
    extracted = ""
    for gold in gold_list(task):
        ok, extracted = math_equal(gold, answer)
        if ok:
            return RewardResult(1.0, True, metadata={"extracted": extracted, "gold": gold})
    return RewardResult(0.0, False, metadata={"extracted": extracted})


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST, used: list[int]) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, used)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left, used), _evaluate(node.right, used)))
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        used.append(node.value)
        return float(node.value)
    raise ValueError(f"not allowed in a countdown equation: {ast.dump(node)[:40]}")


@register_reward_fn("countdown")
def countdown(task: Task, answer: str) -> RewardResult:
    """1.0 when the ``<answer>`` equation uses each given number once and hits the target."""
    truth = truth_of(task)
    found = re.findall(r"<answer>(.*?)</answer>", answer, re.DOTALL)
    equation = (
        (found[-1] if found else answer.strip().splitlines()[-1] if answer.strip() else "")
        .split("=")[0]
        .strip()
    )
    used: list[int] = []
    try:
        value = _evaluate(ast.parse(equation, mode="eval"), used)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return RewardResult(0.0, False, metadata={"equation": equation, "error": "unparsable"})
    numbers_ok = Counter(used) == Counter(int(n) for n in truth["nums"])
    ok = numbers_ok and abs(value - float(truth["target"])) < 1e-6
    return RewardResult(
        1.0 if ok else 0.0,
        ok,
        signals={"numbers_ok": float(numbers_ok)},
        metadata={"equation": equation, "value": value},
    )
