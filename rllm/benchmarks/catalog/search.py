"""Search-augmented QA: needs a search tool or corpus; free-form answers judged by a model."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category, Need

__all__: list[str] = []

_PROMPT = (
    "Use the search tool as often as you need, then answer.\n\nQuestion: {question}\n\n"
    "End with 'Exact Answer: <answer>'."
)
_NEEDS = frozenset({Need.SEARCH, Need.JUDGE})
_S = Category.SEARCH

register_benchmarks(
    BenchmarkSpec(
        name="browsecomp_plus",
        title="BrowseComp-Plus",
        category=_S,
        hf_id="Tevatron/browsecomp-plus",
        id_field="query_id",
        fields={"question": "query", "answer": "answer"},
        prompt=_PROMPT,
        reward_fn="llm_judge",
        agent="search",
        needs=_NEEDS,
        aliases=("browsecomp",),
        description="BrowseComp over a fixed 100k-page corpus (Tevatron indexes).",
    ),
    BenchmarkSpec(
        name="sealqa",
        title="SealQA (Seal-0)",
        category=_S,
        hf_id="vtllms/sealqa",
        config="seal_0",
        fields={"question": "question", "answer": "answer"},
        prompt=_PROMPT,
        reward_fn="llm_judge",
        agent="search",
        needs=_NEEDS,
        aliases=("seal_0", "seal0"),
        description="Questions where search returns conflicting or noisy results.",
    ),
    BenchmarkSpec(
        name="sealqa_hard",
        title="SealQA (Seal-Hard)",
        category=_S,
        hf_id="vtllms/sealqa",
        config="seal_hard",
        fields={"question": "question", "answer": "answer"},
        prompt=_PROMPT,
        reward_fn="llm_judge",
        agent="search",
        needs=_NEEDS,
        aliases=("seal_hard",),
        description="The larger, hard SealQA split.",
    ),
    BenchmarkSpec(
        name="frames",
        title="FRAMES",
        category=_S,
        hf_id="google/frames-benchmark",
        fields={"question": "Prompt", "answer": "Answer"},
        prompt=_PROMPT,
        reward_fn="llm_judge",
        agent="search",
        needs=_NEEDS,
        description="Multi-hop factual retrieval over Wikipedia articles.",
    ),
)
