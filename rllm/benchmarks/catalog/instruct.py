"""Instruction following: verifiable constraints checked by the ``ifeval`` grader."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category

__all__: list[str] = []

_ifeval = benchmark_kind(
    Category.INSTRUCTION,
    split="train",
    id_field="key",
    fields={"prompt": "prompt", "instruction_ids": "instruction_id_list", "kwargs": "kwargs"},
    adapter="ifeval",
    prompt="{prompt}",
    reward_fn="ifeval",
)

register_benchmarks(
    _ifeval(
        "ifeval",
        "IFEval",
        "google/IFEval",
        description="541 prompts with 25 kinds of verifiable instructions.",
    ),
    _ifeval(
        "ifbench",
        "IFBench",
        "allenai/IFBench_test",
        description="58 new out-of-domain constraints (only IFEval-style ids are "
        "graded here; others raise).",
    ),
)
