"""Search-augmented QA: needs a search tool or corpus; free-form answers judged by a model."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category, Need

__all__: list[str] = []

_PROMPT = (
    "Use the search tool as often as you need, then answer.\n\nQuestion: {question}\n\n"
    "End with 'Exact Answer: <answer>'."
)
_search = benchmark_kind(
    Category.SEARCH,
    prompt=_PROMPT,
    reward_fn="llm_judge",
    agent="search",
    needs=frozenset({Need.SEARCH, Need.JUDGE}),
)
_QA = {"question": "question", "answer": "answer"}

register_benchmarks(
    _search(
        "browsecomp_plus",
        "BrowseComp-Plus",
        "Tevatron/browsecomp-plus",
        {"question": "query", "answer": "answer"},
        id_field="query_id",
        aliases=("browsecomp",),
        description="BrowseComp over a fixed 100k-page corpus (Tevatron indexes).",
    ),
    _search(
        "sealqa",
        "SealQA (Seal-0)",
        "vtllms/sealqa",
        _QA,
        config="seal_0",
        aliases=("seal_0", "seal0"),
        description="Questions where search returns conflicting or noisy results.",
    ),
    _search(
        "sealqa_hard",
        "SealQA (Seal-Hard)",
        "vtllms/sealqa",
        _QA,
        config="seal_hard",
        aliases=("seal_hard",),
        description="The larger, hard SealQA split.",
    ),
    _search(
        "frames",
        "FRAMES",
        "google/frames-benchmark",
        {"question": "Prompt", "answer": "Answer"},
        description="Multi-hop factual retrieval over Wikipedia articles.",
    ),
)
