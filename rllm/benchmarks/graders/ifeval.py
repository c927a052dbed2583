"""``ifeval``: every verifiable instruction of the prompt followed (IFEval's strict prompt-
level accuracy); instruction-level and loose scores are reported as signals."""

from __future__ import annotations

from typing import Any

from rllm.benchmarks.errors import GradingError
from rllm.benchmarks.graders.common import truth_of
from rllm.benchmarks.graders.ifeval_checks import CHECKERS
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["follows", "ifeval"]


def _loose_variants(response: str) -> list[str]:
    lines = response.split("\n")
    bases = [
        response,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return [v for b in bases for v in (b, b.replace("*", ""))]


def follows(
    instruction_id: str, response: str, kwargs: dict[str, Any], loose: bool = False
) -> bool:
    """Whether ``response`` follows one instruction.

    Raises:
        GradingError: the instruction id has no checker here.
    """
    checker = CHECKERS.get(instruction_id)
    if checker is None:
        raise GradingError(f"no checker for instruction id {instruction_id!r}")
    if instruction_id == "combination:repeat_prompt" or not loose:
        return bool(response.strip()) and checker(response, **kwargs)
    return any(v.strip() and checker(v, **kwargs) for v in _loose_variants(response))


@register_reward_fn("ifeval")
def ifeval(task: Task, answer: str) -> RewardResult:
    """1.0 when every instruction is followed (strict).

    Raises:
        GradingError: naming the instruction ids that have no checker (e.g. most of IFBench's).
    """
    truth = truth_of(task)
    ids: list[str] = truth["instruction_id_list"]
    kwargs: list[dict[str, Any]] = truth["kwargs"]
    unknown = [i for i in ids if i not in CHECKERS]
    if unknown:
        raise GradingError(f"task {task.task_id!r}: no checker for instruction ids {unknown}")
    strict = [follows(i, answer, kw) for i, kw in zip(ids, kwargs, strict=True)]
    loose = [follows(i, answer, kw, loose=True) for i, kw in zip(ids, kwargs, strict=True)]
    ok = all(strict)
    return RewardResult(
        1.0 if ok else 0.0,
        ok,
        signals={
            "instruction_strict": sum(strict) / len(ids),
            "instruction_loose": sum(loose) / len(ids),
            "prompt_loose": float(all(loose)),
        },
        metadata={"followed": dict(zip(ids, strict, strict=True))},
    )
