"""Question answering: short answers graded by SQuAD-style F1/EM, or by a judge model."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category, Need

__all__ = ["QA_PROMPT"]

QA_PROMPT = (
    "Answer the question with a short phrase.\n\nQuestion: {question}\n\nEnd with "
    "'Answer: <short answer>'."
)
_CTX = (
    "Read the passage and answer the question with a short phrase.\n\n{context}\n\n"
    "Question: {question}\n\nEnd with 'Answer: <short answer>'."
)
_A = Category.QA

register_benchmarks(
    BenchmarkSpec(
        name="hotpotqa",
        title="HotpotQA",
        category=_A,
        hf_id="hotpotqa/hotpot_qa",
        config="distractor",
        split="validation",
        id_field="id",
        fields={"question": "question", "answer": "answer"},
        optional={"level": "level", "type": "type"},
        metadata=("level", "type"),
        prompt=QA_PROMPT,
        reward_fn="f1",
        aliases=("hotpot_qa",),
        description="Multi-hop Wikipedia questions (closed-book prompt).",
    ),
    BenchmarkSpec(
        name="nq_open",
        title="Natural Questions (open)",
        category=_A,
        hf_id="google-research-datasets/nq_open",
        split="validation",
        fields={"question": "question", "answer": "answer"},
        adapter="aliases",
        prompt=QA_PROMPT,
        reward_fn="em",
        aliases=("nq", "natural_questions"),
        description="Google search queries with short Wikipedia answers.",
    ),
    BenchmarkSpec(
        name="triviaqa",
        title="TriviaQA",
        category=_A,
        hf_id="mandarjoshi/trivia_qa",
        config="rc.nocontext",
        split="validation",
        id_field="question_id",
        fields={"question": "question", "answer": "answer"},
        adapter="aliases",
        prompt=QA_PROMPT,
        reward_fn="em",
        aliases=("trivia_qa",),
        description="Trivia questions with answer aliases.",
    ),
    BenchmarkSpec(
        name="musique",
        title="MuSiQue",
        category=_A,
        hf_id="dgslibisey/MuSiQue",
        split="validation",
        id_field="id",
        fields={"question": "question", "answer": "answer"},
        optional={"aliases": "answer_aliases"},
        adapter="aliases",
        prompt=QA_PROMPT,
        reward_fn="f1",
        description="2-4 hop questions composed from single hops.",
    ),
    BenchmarkSpec(
        name="squad",
        title="SQuAD v1.1",
        category=_A,
        hf_id="rajpurkar/squad",
        split="validation",
        id_field="id",
        fields={"question": "question", "context": "context", "answer": "answers.text"},
        adapter="aliases",
        prompt=_CTX,
        reward_fn="f1",
        description="Reading comprehension over Wikipedia.",
    ),
    BenchmarkSpec(
        name="popqa",
        title="PopQA",
        category=_A,
        hf_id="akariasai/PopQA",
        id_field="id",
        fields={"question": "question", "answer": "possible_answers"},
        adapter="aliases",
        prompt=QA_PROMPT,
        reward_fn="em",
        description="Entity-centric questions over long-tail popularity.",
    ),
    BenchmarkSpec(
        name="bamboogle",
        title="Bamboogle",
        category=_A,
        hf_id="chiayewken/bamboogle",
        fields={"question": "Question", "answer": "Answer"},
        prompt=QA_PROMPT,
        reward_fn="f1",
        description="125 two-hop questions Google cannot answer.",
    ),
    BenchmarkSpec(
        name="boolq",
        title="BoolQ",
        category=_A,
        hf_id="google/boolq",
        split="validation",
        fields={"question": "question", "context": "passage", "answer": "answer"},
        adapter="boolq",
        prompt=_CTX.replace("a short phrase", "yes or no"),
        reward_fn="em",
        description="Naturally occurring yes/no questions.",
    ),
    BenchmarkSpec(
        name="simpleqa",
        title="SimpleQA",
        category=_A,
        hf_id="basicv8vc/SimpleQA",
        fields={"question": "problem", "answer": "answer"},
        prompt=QA_PROMPT,
        reward_fn="llm_judge",
        needs=frozenset({Need.JUDGE}),
        description="Short fact-seeking questions, judged by a grader model.",
    ),
    BenchmarkSpec(
        name="hle",
        title="Humanity's Last Exam",
        category=_A,
        hf_id="cais/hle",
        id_field="id",
        fields={"question": "question", "answer": "answer"},
        optional={"answer_type": "answer_type", "category": "category", "image": "image"},
        metadata=("answer_type", "category", "image"),
        prompt=QA_PROMPT,
        reward_fn="llm_judge",
        needs=frozenset({Need.JUDGE}),
        aliases=("humanitys_last_exam",),
        description="2.5k expert questions at the frontier (gated; some with images).",
    ),
)
