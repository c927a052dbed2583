"""Question answering: short answers graded by SQuAD-style F1/EM, or by a judge model."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category, Need

__all__ = ["QA_PROMPT"]

QA_PROMPT = (
    "Answer the question with a short phrase.\n\nQuestion: {question}\n\nEnd with "
    "'Answer: <short answer>'."
)
_CTX = (
    "Read the passage and answer the question with a short phrase.\n\n{context}\n\n"
    "Question: {question}\n\nEnd with 'Answer: <short answer>'."
)
_qa = benchmark_kind(Category.QA, prompt=QA_PROMPT)
_QA = {"question": "question", "answer": "answer"}
# The answer and its aliases (a list, a JSON list, or TriviaQA's {"value", "aliases"}).
_aliased = _qa.variant(adapter="aliases")
_judged = _qa.variant(reward_fn="llm_judge", needs=frozenset({Need.JUDGE}))

register_benchmarks(
    _qa(
        "hotpotqa",
        "HotpotQA",
        "hotpotqa/hotpot_qa",
        _QA,
        config="distractor",
        split="validation",
        id_field="id",
        meta=("level", "type"),
        reward_fn="f1",
        aliases=("hotpot_qa",),
        description="Multi-hop Wikipedia questions (closed-book prompt).",
    ),
    _aliased(
        "nq_open",
        "Natural Questions (open)",
        "google-research-datasets/nq_open",
        _QA,
        split="validation",
        reward_fn="em",
        aliases=("nq", "natural_questions"),
        description="Google search queries with short Wikipedia answers.",
    ),
    _aliased(
        "triviaqa",
        "TriviaQA",
        "mandarjoshi/trivia_qa",
        _QA,
        config="rc.nocontext",
        split="validation",
        id_field="question_id",
        reward_fn="em",
        aliases=("trivia_qa",),
        description="Trivia questions with answer aliases.",
    ),
    _aliased(
        "musique",
        "MuSiQue",
        "dgslibisey/MuSiQue",
        _QA,
        split="validation",
        id_field="id",
        optional={"aliases": "answer_aliases"},
        reward_fn="f1",
        description="2-4 hop questions composed from single hops.",
    ),
    _aliased(
        "squad",
        "SQuAD v1.1",
        "rajpurkar/squad",
        {"question": "question", "context": "context", "answer": "answers.text"},
        split="validation",
        id_field="id",
        prompt=_CTX,
        reward_fn="f1",
        description="Reading comprehension over Wikipedia.",
    ),
    _aliased(
        "popqa",
        "PopQA",
        "akariasai/PopQA",
        {"question": "question", "answer": "possible_answers"},
        id_field="id",
        reward_fn="em",
        description="Entity-centric questions over long-tail popularity.",
    ),
    _qa(
        "bamboogle",
        "Bamboogle",
        "chiayewken/bamboogle",
        {"question": "Question", "answer": "Answer"},
        reward_fn="f1",
        description="125 two-hop questions Google cannot answer.",
    ),
    _qa(
        "boolq",
        "BoolQ",
        "google/boolq",
        {"question": "question", "context": "passage", "answer": "answer"},
        split="validation",
        adapter="boolq",
        prompt=_CTX.replace("a short phrase", "yes or no"),
        reward_fn="em",
        description="Naturally occurring yes/no questions.",
    ),
    _judged(
        "simpleqa",
        "SimpleQA",
        "basicv8vc/SimpleQA",
        {"question": "problem", "answer": "answer"},
        description="Short fact-seeking questions, judged by a grader model.",
    ),
    _judged(
        "hle",
        "Humanity's Last Exam",
        "cais/hle",
        _QA,
        id_field="id",
        meta=("answer_type", "category", "image"),
        aliases=("humanitys_last_exam",),
        description="2.5k expert questions at the frontier (gated; some with images).",
    ),
)
