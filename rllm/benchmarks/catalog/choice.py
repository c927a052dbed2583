"""Multiple-choice benchmarks: a letter, extracted robustly from the answer's prose."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category

__all__ = ["MCQ_PROMPT"]

MCQ_PROMPT = (
    "{question}\n\n{choices_text}\n\nThink it through, then end with "
    "'Answer: X' where X is the letter of the correct option."
)
_Q = Category.MCQ


def _mcq(
    name: str, title: str, hf_id: str, fields: dict[str, str], adapter: str, **kw: object
) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=name,
        title=title,
        category=_Q,
        hf_id=hf_id,
        fields=fields,
        adapter=adapter,
        prompt=str(kw.pop("prompt", MCQ_PROMPT)),
        reward_fn="mcq",
        **kw,
    )


_QCA = {"question": "question", "choices": "choices", "answer": "answer"}

register_benchmarks(
    _mcq(
        "mmlu",
        "MMLU",
        "cais/mmlu",
        _QCA,
        "index_choices",
        config="all",
        optional={"subject": "subject"},
        metadata=("subject",),
        description="57-subject knowledge exam (14k test questions).",
    ),
    _mcq(
        "mmlu_pro",
        "MMLU-Pro",
        "TIGER-Lab/MMLU-Pro",
        {"question": "question", "choices": "options", "answer": "answer"},
        "letter_choices",
        id_field="question_id",
        optional={"category": "category"},
        metadata=("category",),
        aliases=("mmlupro",),
        description="Harder MMLU with up to 10 options.",
    ),
    _mcq(
        "mmlu_redux",
        "MMLU-Redux 2.0",
        "edinburgh-dawg/mmlu-redux-2.0",
        _QCA,
        "index_choices",
        config="abstract_algebra",
        optional={"error_type": "error_type"},
        metadata=("error_type",),
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
    _mcq(
        "supergpqa",
        "SuperGPQA",
        "m-a-p/SuperGPQA",
        {"question": "question", "choices": "options", "answer": "answer_letter"},
        "letter_choices",
        split="train",
        id_field="uuid",
        optional={"discipline": "discipline", "difficulty": "difficulty"},
        metadata=("discipline", "difficulty"),
        description="26k questions over 285 disciplines.",
    ),
    _mcq(
        "ceval",
        "C-Eval",
        "ceval/ceval-exam",
        {"question": "question", "A": "A", "B": "B", "C": "C", "D": "D", "answer": "answer"},
        "column_choices",
        config="computer_network",
        split="val",
        id_field="id",
        aliases=("c-eval",),
        description="Chinese exam questions; test answers are hidden.",
    ),
    _mcq(
        "cmmlu",
        "CMMLU",
        "haonan-li/cmmlu",
        {"question": "Question", "A": "A", "B": "B", "C": "C", "D": "D", "answer": "Answer"},
        "column_choices",
        config="agronomy",
        description="Chinese massive multitask language.",
    ),
    _mcq(
        "arc_challenge",
        "ARC-Challenge",
        "allenai/ai2_arc",
        {"question": "question", "choices": "choices", "answer": "answerKey"},
        "labeled_choices",
        config="ARC-Challenge",
        id_field="id",
        aliases=("arc", "arc_c"),
        description="Grade-school science, the hard set.",
    ),
    _mcq(
        "arc_easy",
        "ARC-Easy",
        "allenai/ai2_arc",
        {"question": "question", "choices": "choices", "answer": "answerKey"},
        "labeled_choices",
        config="ARC-Easy",
        id_field="id",
        aliases=("arc_e",),
        description="Grade-school science, the easy set.",
    ),
    _mcq(
        "commonsense_qa",
        "CommonsenseQA",
        "tau/commonsense_qa",
        {"question": "question", "choices": "choices", "answer": "answerKey"},
        "labeled_choices",
        split="validation",
        id_field="id",
        aliases=("csqa",),
        description="Commonsense questions over ConceptNet.",
    ),
    _mcq(
        "openbookqa",
        "OpenBookQA",
        "allenai/openbookqa",
        {"question": "question_stem", "choices": "choices", "answer": "answerKey"},
        "labeled_choices",
        config="main",
        id_field="id",
        aliases=("obqa",),
        description="Elementary science with an open book of facts.",
    ),
    _mcq(
        "hellaswag",
        "HellaSwag",
        "Rowan/hellaswag",
        {"question": "ctx", "choices": "endings", "answer": "label"},
        "index_choices",
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
        "winogrande",
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
        "piqa",
        split="validation",
        description="Physical commonsense: which solution works?",
    ),
    _mcq(
        "truthfulqa_mc1",
        "TruthfulQA (MC1)",
        "truthfulqa/truthful_qa",
        {"question": "question", "targets": "mc1_targets"},
        "mc1_targets",
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
        "sciq",
        description="Crowd-sourced science exam questions.",
    ),
    _mcq(
        "medqa",
        "MedQA (USMLE, 4 options)",
        "GBaker/MedQA-USMLE-4-options",
        {"question": "question", "choices": "options", "answer": "answer_idx"},
        "dict_choices",
        description="US medical licensing exam questions.",
    ),
)
