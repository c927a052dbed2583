"""Agentic benchmarks: run by a harness (tools, environment, sandbox) that assigns rewards."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category, Need

__all__: list[str] = []

_HARNESS_ONLY = frozenset({Need.HARNESS})
_agentic = benchmark_kind(Category.AGENTIC)
# Graded by the harness (RewardAssigned events), not by a reward function.
_graded = _agentic.variant(
    truth="", reward_fn="harness", needs=frozenset({Need.HARNESS, Need.SANDBOX})
)
# Rows only from a data file of the harness's tasks (``source="harness"``).
_harness_rows = _graded.variant(source="harness")
# Task folders run by a harness that grades them; the row carries only the instruction.
_task_folders = _harness_rows.variant(
    id_field="task_id",
    fields={"instruction": "instruction"},
    prompt="{instruction}",
)
_swebench = _graded.variant(
    truth="instance_id",
    id_field="instance_id",
    fields={"repo": "repo", "problem": "problem_statement", "instance_id": "instance_id"},
    prompt="Resolve this issue in {repo}:\n\n{problem}",
    agent="harness:swebench",
)

register_benchmarks(
    _swebench(
        "swebench_verified",
        "SWE-bench Verified",
        "princeton-nlp/SWE-bench_Verified",
        metadata=("repo",),
        meta=("base_commit", "version"),
        aliases=("swe_bench_verified", "swebench"),
        description="500 human-validated GitHub issues; graded by running repo tests.",
    ),
    _swebench(
        "swebench_lite",
        "SWE-bench Lite",
        "princeton-nlp/SWE-bench_Lite",
        aliases=("swe_bench_lite",),
        description="300 self-contained SWE-bench issues.",
    ),
    _task_folders(
        "terminal_bench2",
        "Terminal-Bench 2.0",
        "harborframework/terminal-bench-2.0",
        agent="harness:terminal_bench",
        aliases=("terminal_bench", "tbench2", "terminal-bench-2.0"),
        homepage="https://www.tbench.ai",
        description="89 terminal tasks in containers, each with its own tests.",
    ),
    _task_folders(
        "skillsbench",
        "SkillsBench",
        "benchflow/skillsbench",
        agent="harness:skillsbench",
        homepage="https://www.skillsbench.ai",
        description="Tasks measuring how well agents use skill folders.",
    ),
    _harness_rows(
        "bfcl",
        "Berkeley Function-Calling Leaderboard",
        "gorilla-llm/Berkeley-Function-Calling-Leaderboard",
        {"question": "question", "functions": "function"},
        id_field="id",
        metadata=("functions",),
        agent="harness:bfcl",
        needs=_HARNESS_ONLY,
        aliases=("bfcl_v3",),
        description="Function-calling accuracy (AST and executable checks).",
    ),
    _agentic(
        "gaia",
        "GAIA",
        "gaia-benchmark/GAIA",
        {"question": "Question", "answer": "Final answer"},
        config="2023_all",
        split="validation",
        id_field="task_id",
        optional={"level": "Level", "file_name": "file_name"},
        metadata=("level", "file_name"),
        prompt="{question}\n\nEnd with 'FINAL ANSWER: <answer>'.",
        reward_fn="em",
        agent="search",
        needs=frozenset({Need.SEARCH, Need.HARNESS}),
        description="General assistant tasks with tools and files (gated).",
    ),
    _task_folders(
        "tau_bench",
        "tau-bench",
        agent="harness:tau_bench",
        needs=_HARNESS_ONLY,
        aliases=("tau2_bench", "taubench"),
        homepage="https://github.com/sierra-research/tau-bench",
        description="Tool-agent-user conversations in retail and airline domains.",
    ),
    _task_folders(
        "appworld",
        "AppWorld",
        agent="harness:appworld",
        homepage="https://appworld.dev",
        description="Everyday tasks over 9 simulated apps via their APIs.",
    ),
)
