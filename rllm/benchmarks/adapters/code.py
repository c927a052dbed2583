"""Adapters of the code benchmarks: build the test spec the ``code`` grader runs."""

from __future__ import annotations

import json
from typing import Any

from rllm.benchmarks.adapters import Vars, adapter, as_list
from rllm.benchmarks.errors import DatasetRowError

__all__ = []


# --- code ---------------------------------------------------------------------------------


@adapter("humaneval")
def _humaneval(v: Vars) -> Vars:
    return {
        "answer": {
            "kind": "humaneval",
            "prompt": v["prompt"],
            "test": v["test"],
            "entry_point": v["entry_point"],
        }
    }


@adapter("mbpp")
def _mbpp(v: Vars) -> Vars:
    tests = [str(t) for t in as_list(v["tests"], "tests")]
    imports = "\n".join(as_list(v.get("imports") or [], "imports"))  # mbpp_sanitized's
    setup = "\n".join(x for x in (imports, v.get("setup")) if x)
    return {
        "tests_text": "\n".join(tests),
        "answer": {"kind": "asserts", "tests": tests, "setup": setup},
    }


@adapter("mbpp_plus")
def _mbpp_plus(v: Vars) -> Vars:
    imports = "\n".join(as_list(v.get("imports") or [], "imports"))
    shown = [str(t) for t in as_list(v["tests"], "tests")]
    return {
        "tests_text": "\n".join(shown),
        "answer": {"kind": "asserts", "tests": [str(v["test"])], "setup": imports},
    }


def _stdio(inputs: list[Any], outputs: list[Any], fn_name: str | None = None) -> dict[str, Any]:
    cases = [{"input": str(i), "output": str(o)} for i, o in zip(inputs, outputs, strict=False)]
    if not cases:
        raise DatasetRowError("the row has no test cases")
    return {"kind": "functional" if fn_name else "stdio", "cases": cases, "fn_name": fn_name}


@adapter("livecodebench")
def _livecodebench(v: Vars) -> Vars:
    public = (
        json.loads(v["public_tests"]) if isinstance(v["public_tests"], str) else v["public_tests"]
    )
    meta = json.loads(v.get("meta") or "{}")
    functional = any(c.get("testtype") == "functional" for c in public)
    truth = _stdio(
        [c["input"] for c in public],
        [c["output"] for c in public],
        meta.get("func_name") if functional else None,
    )
    starter = v.get("starter_code") or ""
    hint = (
        f"\n\nStart from this code:\n```python\n{starter}\n```"
        if starter
        else "\n\nRead the input from stdin and write the answer to stdout."
    )
    return {"answer": truth, "format_hint": hint}


@adapter("apps")
def _apps(v: Vars) -> Vars:
    io = json.loads(v["input_output"]) if v["input_output"] else {}
    inputs, outputs = io.get("inputs", []), io.get("outputs", [])
    fn = io.get("fn_name")
    if fn:  # call-based: arguments and results are JSON
        inputs = ["\n".join(json.dumps(a) for a in args) for args in inputs]
        outputs = [json.dumps(o[0] if isinstance(o, list) and len(o) == 1 else o) for o in outputs]
    else:
        inputs = ["\n".join(i) if isinstance(i, list) else i for i in inputs]
        outputs = ["\n".join(o) if isinstance(o, list) else o for o in outputs]
    return {"answer": _stdio(inputs, outputs, fn), "starter_code": v.get("starter_code") or ""}


@adapter("code_contests")
def _code_contests(v: Vars) -> Vars:
    tests = v["public_tests"]
    private = v.get("private_tests") or {"input": [], "output": []}
    return {
        "answer": _stdio(
            [*tests["input"], *private["input"]], [*tests["output"], *private["output"]]
        )
    }
