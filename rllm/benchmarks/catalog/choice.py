"""Multiple-choice benchmarks: a letter, extracted robustly from the answer's prose."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category

__all__ = ["MCQ_PROMPT"]

MCQ_PROMPT = (
    "{question}\n\n{choices_text}\n\nThink it through, then end with "
    "'Answer: X' where X is the letter of the correct option."
)


_mcq = benchmark_kind(Category.MCQ, prompt=MCQ_PROMPT, reward_fn="mcq")
# Choices as a list and the answer as an index into it.
_indexed = _mcq.variant(
    fields={"question": "question", "choices": "choices", "answer": "answer"},
    adapter="index_choices",
)
# Choices as {"text": [...], "label": [...]} and the answer as one of the labels.
_labeled = _mcq.variant(
    fields={"question": "question", "choices": "choices", "answer": "answerKey"},
    adapter="labeled_choices",
    id_field="id",
)
# Choices as a list and the answer as its letter.
_lettered = _mcq.variant(adapter="letter_choices")
# One column per option (``A`` to ``D``) and the answer as its letter.
_columns = _mcq.variant(adapter="column_choices")
_ABCD = {"A": "A", "B": "B", "C": "C", "D": "D"}

register_benchmarks(
    _indexed(
        "mmlu",
        "MMLU",
        "cais/mmlu",
        config="all",
        meta=("subject",),
        description="57-subject knowledge exam (14k test questions).",
    ),
    _lettered(
        "mmlu_pro",
        "MMLU-Pro",
        "TIGER-Lab/MMLU-Pro",
        {"question": "question", "choices": "options", "answer": "answer"},
        id_field="question_id",
        meta=("category",),
        aliases=("mmlupro",),
        description="Harder MMLU with up to 10 options.",
    ),
    _indexed(
        "mmlu_redux",
        "MMLU-Redux 2.0",
        "edinburgh-dawg/mmlu-redux-2.0",
        config="abstract_algebra",
        meta=("error_type",),
        aliases=("mmluredux",),
        description="Re-annotated MMLU subset (config is the subject).",
    ),
    _mcq(
        "gpqa_diamond",
        "GPQA Diamond",
        "Idavidrein/gpqa",
        config="gpqa_diamond",
        split="train",
        id_field="Record ID",
        fields={
            "question": "Question",
            "correct": "Correct Answer",
            "wrong1": "Incorrect Answer 1",
            "wrong2": "Incorrect Answer 2",
            "wrong3": "Incorrect Answer 3",
        },
        adapter="gpqa",
        aliases=("gpqa",),
        description="198 graduate-level science questions (options shuffled per row, gated).",
    ),
    _lettered(
        "supergpqa",
        "SuperGPQA",
        "m-a-p/SuperGPQA",
        {"question": "question", "choices": "options", "answer": "answer_letter"},
        split="train",
        id_field="uuid",
        meta=("discipline", "difficulty"),
        description="26k questions over 285 disciplines.",
    ),
    _columns(
        "ceval",
        "C-Eval",
        "ceval/ceval-exam",
        {"question": "question", **_ABCD, "answer": "answer"},
        config="computer_network",
        split="val",
        id_field="id",
        aliases=("c-eval",),
        description="Chinese exam questions; test answers are hidden.",
    ),
    _columns(
        "cmmlu",
        "CMMLU",
        "haonan-li/cmmlu",
        {"question": "Question", **_ABCD, "answer": "Answer"},
        config="agronomy",
        description="Chinese massive multitask language.",
    ),
    _labeled(
        "arc_challenge",
        "ARC-Challenge",
        "allenai/ai2_arc",
        config="ARC-Challenge",
        aliases=("arc", "arc_c"),
        description="Grade-school science, the hard set.",
    ),
    _labeled(
        "arc_easy",
        "ARC-Easy",
        "allenai/ai2_arc",
        config="ARC-Easy",
        aliases=("arc_e",),
        description="Grade-school science, the easy set.",
    ),
    _labeled(
        "commonsense_qa",
        "CommonsenseQA",
        "tau/commonsense_qa",
        split="validation",
        aliases=("csqa",),
        description="Commonsense questions over ConceptNet.",
    ),
    _labeled(
        "openbookqa",
        "OpenBookQA",
        "allenai/openbookqa",
        {"question": "question_stem", "choices": "choices", "answer": "answerKey"},
        config="main",
        aliases=("obqa",),
        description="Elementary science with an open book of facts.",
    ),
    _indexed(
        "hellaswag",
        "HellaSwag",
        "Rowan/hellaswag",
        {"question": "ctx", "choices": "endings", "answer": "label"},
        split="validation",
        id_field="ind",
        prompt="Choose the most plausible continuation.\n\n{question}\n\n{choices_text}\n\n"
        "End with 'Answer: X'.",
        description="Commonsense sentence completion.",
    ),
    _mcq(
        "winogrande",
        "WinoGrande",
        "allenai/winogrande",
        {"question": "sentence", "option1": "option1", "option2": "option2", "answer": "answer"},
        adapter="winogrande",
        config="winogrande_xl",
        split="validation",
        prompt="Which option fills the blank (_)?\n\n{question}\n\n{choices_text}\n\n"
        "End with 'Answer: X'.",
        description="Pronoun resolution at scale.",
    ),
    _mcq(
        "piqa",
        "PIQA",
        "ybisk/piqa",
        {"question": "goal", "option1": "sol1", "option2": "sol2", "answer": "label"},
        adapter="piqa",
        split="validation",
        description="Physical commonsense: which solution works?",
    ),
    _mcq(
        "truthfulqa_mc1",
        "TruthfulQA (MC1)",
        "truthfulqa/truthful_qa",
        {"question": "question", "targets": "mc1_targets"},
        adapter="mc1_targets",
        config="multiple_choice",
        split="validation",
        aliases=("truthfulqa",),
        description="Questions that tempt imitative falsehoods, single-true format.",
    ),
    _mcq(
        "sciq",
        "SciQ",
        "allenai/sciq",
        {
            "question": "question",
            "correct": "correct_answer",
            "wrong1": "distractor1",
            "wrong2": "distractor2",
            "wrong3": "distractor3",
        },
        adapter="sciq",
        description="Crowd-sourced science exam questions.",
    ),
    _mcq(
        "medqa",
        "MedQA (USMLE, 4 options)",
        "GBaker/MedQA-USMLE-4-options",
        {"question": "question", "choices": "options", "answer": "answer_idx"},
        adapter="dict_choices",
        description="US medical licensing exam questions.",
    ),
)
