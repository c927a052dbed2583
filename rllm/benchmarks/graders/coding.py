"""``code``: run the answer's program against the task's tests in the sandbox.

Ground truths (JSON) come in three kinds: ``humaneval`` (prompt, test, entry_point; the
program is built and judged as HumanEval's ``check_correctness`` does), ``asserts`` (MBPP:
setup + code + assert lines) and ``stdio``/``functional`` (input/output cases).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rllm.benchmarks.errors import GradingError
from rllm.benchmarks.graders.common import truth_of
from rllm.benchmarks.graders.sandbox import SandboxResult, run_python
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.schemas.types import Task

__all__ = ["build_program", "code", "extract_code"]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(answer: str) -> str:
    """The last fenced code block (``` or ```python), else the whole answer."""
    blocks = _FENCE.findall(answer)
    if blocks:
        return str(blocks[-1])
    unterminated = re.search(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*)$", answer, re.DOTALL)
    return unterminated.group(1) if unterminated else answer


def build_program(truth: dict[str, Any], code_text: str) -> str:
    """The program whose clean exit means "passed" (humaneval and asserts kinds)."""
    kind = truth.get("kind")
    if kind == "humaneval":
        entry = truth["entry_point"]
        # A whole function (the usual chat reply) redefines the prompt's stub; a bare body
        # continues the prompt, as in HumanEval's own check program.
        defines = re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code_text, re.MULTILINE)
        completion = ("\n" + code_text) if defines else code_text
        return f"{truth['prompt']}{completion}\n\n{truth['test']}\n\ncheck({entry})\n"
    if kind == "asserts":
        return "\n".join([truth.get("setup") or "", code_text, "", *truth["tests"], ""])
    raise GradingError(f"unknown code ground-truth kind {kind!r}")


def _functional_program(code_text: str, fn_name: str) -> str:
    return (
        code_text + "\n\nimport json as _j, sys as _s\n"
        "_args = [_j.loads(l) for l in _s.stdin.read().splitlines() if l.strip()]\n"
        f"_f = Solution().{fn_name} if 'Solution' in globals() else {fn_name}\n"
        "print(_j.dumps(_f(*_args)))\n"
    )


def _same_output(got: str, want: str, functional: bool) -> bool:
    if functional:
        try:
            return bool(json.loads(got) == json.loads(want))
        except json.JSONDecodeError:
            return got.strip() == want.strip()
    return [ln.rstrip() for ln in got.strip().splitlines()] == [
        ln.rstrip() for ln in want.strip().splitlines()
    ]


def _run_cases(truth: dict[str, Any], code_text: str) -> tuple[int, int, str]:
    functional = truth.get("kind") == "functional"
    program = _functional_program(code_text, truth["fn_name"]) if functional else code_text
    passed, detail = 0, ""
    for index, case in enumerate(truth["cases"]):
        result = run_python(program, stdin=case["input"])
        if result.status == "passed" and _same_output(result.stdout, case["output"], functional):
            passed += 1
            continue
        detail = detail or _detail(result, index)
        break  # like most judges, stop at the first failing case
    return passed, len(truth["cases"]), detail


def _detail(result: SandboxResult, index: int) -> str:
    if result.status == "timed out":
        return f"case {index}: timed out"
    if result.status == "failed":
        return f"case {index}: failed: {result.error_line}"
    return f"case {index}: wrong answer"


@register_reward_fn("code")
def code(task: Task, answer: str) -> RewardResult:
    """1.0 when the program passes every test; ``metadata.result`` follows HumanEval's
    wording (``passed``, ``timed out``, ``failed: <error>``)."""
    truth = truth_of(task)
    code_text = extract_code(answer)
    if truth.get("kind") in ("stdio", "functional"):
        passed, total, detail = _run_cases(truth, code_text)
        ok = passed == total
        return RewardResult(
            1.0 if ok else 0.0,
            ok,
            signals={"cases_passed": passed / total},
            metadata={"result": "passed" if ok else detail},
        )
    result = run_python(build_program(truth, code_text))
    text = (
        "passed"
        if result.status == "passed"
        else "timed out"
        if result.status == "timed out"
        else f"failed: {result.error_line}"
    )
    ok = result.status == "passed"
    return RewardResult(
        1.0 if ok else 0.0, ok, metadata={"result": text, "duration_s": round(result.duration_s, 3)}
    )
