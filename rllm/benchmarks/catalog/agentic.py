"""Agentic benchmarks: run by a harness (tools, environment, sandbox) that assigns rewards."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category, Need

__all__: list[str] = []

_G = Category.AGENTIC
_HS = frozenset({Need.HARNESS, Need.SANDBOX})

register_benchmarks(
    BenchmarkSpec(name="swebench_verified", title="SWE-bench Verified", category=_G,
                  hf_id="princeton-nlp/SWE-bench_Verified", id_field="instance_id",
                  fields={"repo": "repo", "problem": "problem_statement",
                          "instance_id": "instance_id"},
                  optional={"base_commit": "base_commit", "version": "version"},
                  metadata=("repo", "base_commit", "version"), truth="instance_id",
                  prompt="Resolve this issue in {repo}:\n\n{problem}", reward_fn="harness",
                  agent="harness:swebench", needs=_HS, aliases=("swe_bench_verified", "swebench"),
                  description="500 human-validated GitHub issues; graded by running repo tests."),
    BenchmarkSpec(name="swebench_lite", title="SWE-bench Lite", category=_G,
                  hf_id="princeton-nlp/SWE-bench_Lite", id_field="instance_id",
                  fields={"repo": "repo", "problem": "problem_statement",
                          "instance_id": "instance_id"}, truth="instance_id",
                  prompt="Resolve this issue in {repo}:\n\n{problem}", reward_fn="harness",
                  agent="harness:swebench", needs=_HS, aliases=("swe_bench_lite",),
                  description="300 self-contained SWE-bench issues."),
    BenchmarkSpec(name="terminal_bench2", title="Terminal-Bench 2.0", category=_G,
                  hf_id="harborframework/terminal-bench-2.0", source="harness",
                  id_field="task_id", fields={"instruction": "instruction"}, truth="",
                  prompt="{instruction}", reward_fn="harness", agent="harness:terminal_bench",
                  needs=_HS, aliases=("terminal_bench", "tbench2", "terminal-bench-2.0"),
                  homepage="https://www.tbench.ai",
                  description="89 terminal tasks in containers, each with its own tests."),
    BenchmarkSpec(name="skillsbench", title="SkillsBench", category=_G,
                  hf_id="benchflow/skillsbench", source="harness", id_field="task_id",
                  fields={"instruction": "instruction"}, truth="", prompt="{instruction}",
                  reward_fn="harness", agent="harness:skillsbench", needs=_HS,
                  homepage="https://www.skillsbench.ai",
                  description="Tasks measuring how well agents use skill folders."),
    BenchmarkSpec(name="bfcl", title="Berkeley Function-Calling Leaderboard", category=_G,
                  hf_id="gorilla-llm/Berkeley-Function-Calling-Leaderboard", source="harness",
                  id_field="id", fields={"question": "question", "functions": "function"},
                  truth="", metadata=("functions",), prompt="{question}", reward_fn="harness",
                  agent="harness:bfcl", needs=frozenset({Need.HARNESS}), aliases=("bfcl_v3",),
                  description="Function-calling accuracy (AST and executable checks)."),
    BenchmarkSpec(name="gaia", title="GAIA", category=_G, hf_id="gaia-benchmark/GAIA",
                  config="2023_all", split="validation", id_field="task_id",
                  fields={"question": "Question", "answer": "Final answer"},
                  optional={"level": "Level", "file_name": "file_name"},
                  metadata=("level", "file_name"),
                  prompt="{question}\n\nEnd with 'FINAL ANSWER: <answer>'.", reward_fn="em",
                  agent="search", needs=frozenset({Need.SEARCH, Need.HARNESS}),
                  description="General assistant tasks with tools and files (gated)."),
    BenchmarkSpec(name="tau_bench", title="tau-bench", category=_G, source="harness",
                  id_field="task_id", fields={"instruction": "instruction"}, truth="",
                  prompt="{instruction}", reward_fn="harness", agent="harness:tau_bench",
                  needs=frozenset({Need.HARNESS}), aliases=("tau2_bench", "taubench"),
                  homepage="https://github.com/sierra-research/tau-bench",
                  description="Tool-agent-user conversations in retail and airline domains."),
    BenchmarkSpec(name="appworld", title="AppWorld", category=_G, source="harness",
                  id_field="task_id", fields={"instruction": "instruction"}, truth="",
                  prompt="{instruction}", reward_fn="harness", agent="harness:appworld",
                  needs=_HS, homepage="https://appworld.dev",
                  description="Everyday tasks over 9 simulated apps via their APIs."),
)
