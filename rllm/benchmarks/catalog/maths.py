"""Maths benchmarks: final answers graded with math-verify."""

from __future__ import annotations

from functools import partial
from typing import Any

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category

__all__ = ["MATH_PROMPT"]

MATH_PROMPT = "{question}\n\nReason step by step, and put your final answer within \\boxed{{}}."


_maths = benchmark_kind(Category.MATH, prompt=MATH_PROMPT, reward_fn="math")


def _math(
    name: str,
    title: str,
    hf_id: str,
    question: str = "problem",
    answer: str = "answer",
    **kw: Any,
) -> BenchmarkSpec:
    fields = {"question": question, "answer": answer, **kw.pop("fields", {})}
    return _maths(name, title, hf_id, fields, **kw)


# Competition sets: one training split of problems with a numeric final answer.
_contest = partial(_math, split="train", adapter="number_answer")
# MathArena's curated contests, their problems numbered in ``problem_idx``.
_matharena = partial(_contest, id_field="problem_idx")


register_benchmarks(
    _math(
        "gsm8k",
        "GSM8K",
        "openai/gsm8k",
        question="question",
        config="main",
        adapter="gsm8k",
        aliases=("gsm-8k",),
        metadata=("rationale",),
        description="Grade-school maths word problems (answer after '####').",
    ),
    _math(
        "math500",
        "MATH-500",
        "HuggingFaceH4/MATH-500",
        id_field="unique_id",
        metadata=("subject", "level"),
        fields={"subject": "subject", "level": "level"},
        description="500-problem subset of MATH chosen by OpenAI's PRM800K.",
    ),
    _math(
        "hendrycks_math",
        "MATH (Hendrycks)",
        "EleutherAI/hendrycks_math",
        config="algebra",
        answer="solution",
        adapter="boxed_solution",
        fields={"solution": "solution"},
        meta=("level", "type"),
        aliases=("math",),
        description="Competition maths; config is the subject.",
    ),
    _contest(
        "aime24",
        "AIME 2024",
        "HuggingFaceH4/aime_2024",
        id_field="id",
        aliases=("aime2024", "aime_2024"),
        description="American Invitational Mathematics Examination 2024 (I and II).",
    ),
    _matharena(
        "aime25",
        "AIME 2025",
        "MathArena/aime_2025",
        aliases=("aime2025", "aime_2025"),
        description="AIME 2025 I and II, as curated by MathArena.",
    ),
    _contest(
        "aime_1983_2024",
        "AIME 1983-2024",
        "di-zhang-fdu/AIME_1983_2024",
        id_field="ID",
        question="Question",
        answer="Answer",
        description="Every AIME problem from 1983 to 2024.",
    ),
    _contest(
        "amc",
        "AMC (AIMO validation)",
        "AI-MO/aimo-validation-amc",
        id_field="id",
        aliases=("amc22", "amc23"),
        description="AMC 12 2022-2023 problems with integer answers.",
    ),
    _matharena(
        "hmmt25",
        "HMMT February 2025",
        "MathArena/hmmt_feb_2025",
        aliases=("hmmt", "hmmt_feb_2025"),
        description="Harvard-MIT Mathematics Tournament, February 2025.",
    ),
    _matharena(
        "brumo25",
        "BRUMO 2025",
        "MathArena/brumo_2025",
        aliases=("brumo",),
        description="Brown University Math Olympiad 2025.",
    ),
    _matharena(
        "cmimc25",
        "CMIMC 2025",
        "MathArena/cmimc_2025",
        aliases=("cmimc",),
        description="Carnegie Mellon Informatics and Mathematics Competition 2025.",
    ),
    _math(
        "olympiadbench",
        "OlympiadBench",
        "Hothan/OlympiadBench",
        config="OE_TO_maths_en_COMP",
        split="train",
        id_field="id",
        question="question",
        answer="final_answer",
        adapter="answer_list",
        aliases=("olympiad_bench",),
        description="Olympiad maths, open-ended text-only English subset.",
    ),
    _math(
        "minerva_math",
        "Minerva Math",
        "math-ai/minervamath",
        question="question",
        aliases=("minerva", "minervamath"),
        adapter="number_answer",
        description="Undergraduate STEM problems from the Minerva paper (272).",
    ),
    _math(
        "deepscaler",
        "DeepScaleR",
        "agentica-org/DeepScaleR-Preview-Dataset",
        split="train",
        aliases=("deepscaler_preview",),
        description="40k competition problems used to train DeepScaleR (training set).",
    ),
    _math(
        "omni_math",
        "Omni-MATH",
        "KbsdJames/Omni-MATH",
        optional={"domain": "domain"},
        meta=("difficulty",),
        description="Olympiad-level maths across 33 domains.",
    ),
    _contest(
        "gsm_hard",
        "GSM-Hard",
        "reasoning-machines/gsm-hard",
        question="input",
        answer="target",
        description="GSM8K with large, unusual numbers.",
    ),
    _math(
        "svamp",
        "SVAMP",
        "ChilleD/SVAMP",
        id_field="ID",
        question="question_concat",
        answer="Answer",
        adapter="number_answer",
        description="Simple variations on arithmetic word problems.",
    ),
    _math(
        "beyond_aime",
        "BeyondAIME",
        "ByteDance-Seed/BeyondAIME",
        description="100 problems harder than AIME, integer answers.",
    ),
    _maths(
        "countdown",
        "Countdown",
        "Jiayi-Pan/Countdown-Tasks-3to4",
        {"target": "target", "nums": "nums"},
        split="train",
        adapter="countdown",
        prompt=(
            "Using the numbers [{nums_text}], each exactly once, and the operations "
            "+, -, *, /, write an equation that equals {target}. Give the final equation "
            "inside <answer></answer>, for example <answer>(1 + 2) / 3</answer>."
        ),
        reward_fn="countdown",
        aliases=("countdown34",),
        description="Reach a target number with arithmetic on 3-4 given numbers.",
    ),
    _maths(
        "multiply",
        "Single-digit multiplication",
        source="synthetic:multiply",
        split="all",
        id_field="id",
        fields={"question": "question", "answer": "answer"},
        prompt="{question}",
        reward_fn="last_number",
        aliases=("multiplication",),
        description="81 generated products 'What is 7 times 8?' (split all; train: 61, test: "
        "20 held out); reward 1 when the last number in the answer is right. Small models "
        "learn it with RL on a CPU.",
    ),
)
