"""Instruction following: verifiable constraints checked by the ``ifeval`` grader."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category

__all__: list[str] = []

_FIELDS = {"prompt": "prompt", "instruction_ids": "instruction_id_list", "kwargs": "kwargs"}

register_benchmarks(
    BenchmarkSpec(
        name="ifeval",
        title="IFEval",
        category=Category.INSTRUCTION,
        hf_id="google/IFEval",
        split="train",
        id_field="key",
        fields=_FIELDS,
        adapter="ifeval",
        prompt="{prompt}",
        reward_fn="ifeval",
        description="541 prompts with 25 kinds of verifiable instructions.",
    ),
    BenchmarkSpec(
        name="ifbench",
        title="IFBench",
        category=Category.INSTRUCTION,
        hf_id="allenai/IFBench_test",
        split="train",
        id_field="key",
        fields=_FIELDS,
        adapter="ifeval",
        prompt="{prompt}",
        reward_fn="ifeval",
        description="58 new out-of-domain constraints (only IFEval-style ids are "
        "graded here; others raise).",
    ),
)
