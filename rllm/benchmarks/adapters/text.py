"""Adapters of the text benchmarks: maths, multiple choice, QA, instructions, translation."""

from __future__ import annotations

import json
import re

from rllm.benchmarks.adapters import LETTERS, Vars, adapter, as_list, choices_vars, shuffled
from rllm.benchmarks.errors import DatasetRowError

__all__ = ["language_name", "last_boxed"]


# --- maths --------------------------------------------------------------------------------


@adapter("gsm8k")
def _gsm8k(v: Vars) -> Vars:
    text = str(v["answer"])
    if "####" not in text:
        raise DatasetRowError("field 'answer' has no '#### <number>' final answer")
    rationale, final = text.rsplit("####", 1)
    return {"answer": final.strip().replace(",", ""), "rationale": rationale.strip()}


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox``) with balanced braces."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[brace + 1 : i]
    return None


@adapter("boxed_solution")
def _boxed_solution(v: Vars) -> Vars:
    boxed = last_boxed(str(v["solution"]))
    if boxed is None:
        raise DatasetRowError("field 'solution' has no \\boxed{...} answer")
    return {"answer": boxed}


@adapter("number_answer")
def _number_answer(v: Vars) -> Vars:
    value = v["answer"]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return {"answer": str(value)}


@adapter("answer_list")
def _answer_list(v: Vars) -> Vars:
    value = v["answer"]
    items = as_list(value, "answer") if not isinstance(value, int | float) else [value]
    return {"answer": [str(x).strip().strip("$") for x in items]}


@adapter("countdown")
def _countdown(v: Vars) -> Vars:
    nums = [int(n) for n in as_list(v["nums"], "nums")]
    return {
        "nums": nums,
        "nums_text": ", ".join(map(str, nums)),
        "answer": {"target": int(v["target"]), "nums": nums},
    }


# --- multiple choice ----------------------------------------------------------------------


@adapter("index_choices")
def _index_choices(v: Vars) -> Vars:
    return choices_vars(v, as_list(v["choices"], "choices"), int(v["answer"]))


@adapter("letter_choices")
def _letter_choices(v: Vars) -> Vars:
    choices = as_list(v["choices"], "choices")
    answer = str(v["answer"]).strip()
    index = int(answer) if answer.isdigit() else LETTERS.index(answer.upper())
    return choices_vars(v, choices, index)


@adapter("labeled_choices")
def _labeled_choices(v: Vars) -> Vars:
    block = v["choices"]
    texts, labels = list(block["text"]), [str(x) for x in block["label"]]
    key = str(v["answer"]).strip()
    if key not in labels:
        raise DatasetRowError(f"answer key {key!r} is not one of the labels {labels}")
    return choices_vars(v, texts, labels.index(key))


@adapter("column_choices")
def _column_choices(v: Vars) -> Vars:
    cols = [v.get(k) for k in "ABCDEFGHIJ" if v.get(k) not in (None, "", "nan")]
    answer = str(v["answer"]).strip().upper()
    return choices_vars(v, cols, LETTERS.index(answer))


@adapter("dict_choices")
def _dict_choices(v: Vars) -> Vars:
    options = v["choices"]
    keys = sorted(options)
    return choices_vars(v, [options[k] for k in keys], keys.index(str(v["answer"]).strip()))


@adapter("gpqa")
def _gpqa(v: Vars) -> Vars:
    correct = str(v["correct"]).strip()
    wrong = [str(v[f"wrong{i}"]).strip() for i in (1, 2, 3)]
    choices = shuffled(str(v["question"]), [correct, *wrong])
    return choices_vars(v, choices, choices.index(correct))


@adapter("sciq")
def _sciq(v: Vars) -> Vars:
    correct = str(v["correct"])
    choices = shuffled(str(v["question"]), [correct, *(str(v[f"wrong{i}"]) for i in (1, 2, 3))])
    return choices_vars(v, choices, choices.index(correct))


@adapter("winogrande")
def _winogrande(v: Vars) -> Vars:
    return choices_vars(v, [v["option1"], v["option2"]], int(str(v["answer"]).strip()) - 1)


@adapter("piqa")
def _piqa(v: Vars) -> Vars:
    return choices_vars(v, [v["option1"], v["option2"]], int(v["answer"]))


@adapter("mc1_targets")
def _mc1_targets(v: Vars) -> Vars:
    targets = v["targets"]
    labels = list(targets["labels"])
    return choices_vars(v, list(targets["choices"]), labels.index(1))


@adapter("boolq")
def _boolq(v: Vars) -> Vars:
    return {"answer": "yes" if v["answer"] in (True, "true", "True", 1) else "no"}


# --- question answering -------------------------------------------------------------------


@adapter("aliases")
def _aliases(v: Vars) -> Vars:
    main = v["answer"]
    if isinstance(main, str) and main.strip().startswith("["):  # PopQA: a JSON list as text
        main = as_list(main, "answer")
    if isinstance(main, dict):  # TriviaQA: {"value": ..., "aliases": [...]}
        items = [main.get("value"), *main.get("aliases", [])]
    else:
        items = [
            *(main if isinstance(main, list) else [main]),
            *(as_list(v["aliases"], "aliases") if v.get("aliases") else []),
        ]
    answers = [str(x) for x in dict.fromkeys(items) if x not in (None, "")]
    if not answers:
        raise DatasetRowError("field 'answer' holds no answer")
    return {"answer": answers}


# --- instruction following, translation ---------------------------------------------------


@adapter("ifeval")
def _ifeval(v: Vars) -> Vars:
    ids = [str(x) for x in as_list(v["instruction_ids"], "instruction_ids")]
    kwargs = v["kwargs"]
    kwargs = json.loads(kwargs) if isinstance(kwargs, str) else list(kwargs)
    if len(kwargs) != len(ids):
        raise DatasetRowError(f"{len(ids)} instruction ids but {len(kwargs)} kwargs")
    clean = [{k: x for k, x in (kw or {}).items() if x is not None} for kw in kwargs]
    return {"answer": {"instruction_id_list": ids, "kwargs": clean, "prompt": v["prompt"]}}


_LANGS = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "zh": "Chinese",
    "ja": "Japanese",
    "ru": "Russian",
    "cs": "Czech",
    "it": "Italian",
    "pt": "Portuguese",
    "ko": "Korean",
    "ar": "Arabic",
    "hi": "Hindi",
    "nl": "Dutch",
    "pl": "Polish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "sv": "Swedish",
    "fi": "Finnish",
    "lt": "Lithuanian",
    "gu": "Gujarati",
    "kk": "Kazakh",
    "is": "Icelandic",
    "et": "Estonian",
}


def language_name(code: str) -> str:
    """``de_DE`` / ``deu_Latn`` / ``de`` -> ``German`` (the code itself when unknown)."""
    return _LANGS.get(re.split(r"[_\-]", code)[0][:2].lower(), code)


@adapter("wmt24pp")
def _wmt24pp(v: Vars) -> Vars:
    src, tgt = str(v["lp"]).split("-", 1)
    return {"source_lang": language_name(src), "target_lang": language_name(tgt)}


@adapter("wmt_pair")
def _wmt_pair(v: Vars) -> Vars:
    """WMT ``translation`` dicts list the config's languages in order (``de-en``: de, en)."""
    pair = v["translation"]
    src, tgt = list(pair)[:2]
    return {
        "source": pair[src],
        "answer": pair[tgt],
        "source_lang": language_name(src),
        "target_lang": language_name(tgt),
    }
