"""Machine translation: chrF against the reference (sacrebleu)."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category

__all__ = ["MT_PROMPT"]

MT_PROMPT = (
    "Translate the following {source_lang} text into {target_lang}. Reply with the "
    "translation only.\n\n{source}"
)
_translation = benchmark_kind(Category.TRANSLATION, prompt=MT_PROMPT, reward_fn="chrf")

register_benchmarks(
    _translation(
        "wmt24pp",
        "WMT24++",
        "google/wmt24pp",
        config="en-de_DE",
        split="train",
        fields={"lp": "lp", "source": "source", "answer": "target"},
        meta=("domain", "is_bad_source"),
        adapter="wmt24pp",
        aliases=("wmt24",),
        description="WMT24 English sources into 55 languages (config en-xx_XX).",
    ),
    _translation(
        "flores",
        "FLORES-200",
        "facebook/flores",
        config="eng_Latn-deu_Latn",
        split="devtest",
        id_field="id",
        fields={"source": "sentence_eng_Latn", "answer": "sentence_deu_Latn"},
        prompt=MT_PROMPT.replace("{source_lang}", "English").replace("{target_lang}", "German"),
        aliases=("flores200", "flores_plus"),
        description="Wikipedia sentences in 200 languages (English to German here).",
    ),
    _translation(
        "wmt19_de_en",
        "WMT19 de-en",
        "wmt/wmt19",
        config="de-en",
        split="validation",
        fields={"translation": "translation"},
        adapter="wmt_pair",
        aliases=("wmt19",),
        description="WMT19 news, German to English.",
    ),
)
