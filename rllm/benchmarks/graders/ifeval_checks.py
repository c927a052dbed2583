"""Checkers of IFEval's 25 verifiable instruction ids, after the paper's definitions.

Each checker takes the response and the instruction's kwargs and says whether the
response follows it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from rllm.benchmarks.errors import GradingError

__all__ = ["CHECKERS"]

Checker = Callable[..., bool]
CHECKERS: dict[str, Checker] = {}


def _check(name: str) -> Callable[[Checker], Checker]:
    def decorate(fn: Checker) -> Checker:
        CHECKERS[name] = fn
        return fn

    return decorate


def _compare(count: int, relation: str, target: int) -> bool:
    if relation == "less than":
        return count < target
    if relation == "at least":
        return count >= target
    raise GradingError(f"unknown relation {relation!r} (expected 'less than' or 'at least')")


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])", text.strip())
    return [p for p in parts if p.strip()]


def _language(text: str) -> str:
    from langdetect import DetectorFactory, detect  # type: ignore[import-untyped,unused-ignore]  # no stubs
    from langdetect.lang_detect_exception import (  # type: ignore[import-untyped,unused-ignore]  # langdetect ships no stubs
        LangDetectException,
    )

    DetectorFactory.seed = 0
    try:
        return str(detect(text))
    except LangDetectException:
        return ""


@_check("punctuation:no_comma")
def _no_comma(r: str, **_: Any) -> bool:
    return "," not in r


@_check("detectable_format:number_highlighted_sections")
def _highlights(r: str, num_highlights: int = 1, **_: Any) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", r) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", r) if h.strip("*").strip()]
    return len(single) + len(double) >= num_highlights


@_check("length_constraints:number_words")
def _n_words(r: str, num_words: int, relation: str, **_: Any) -> bool:
    return _compare(len(_words(r)), relation, num_words)


@_check("length_constraints:number_sentences")
def _n_sentences(r: str, num_sentences: int, relation: str, **_: Any) -> bool:
    return _compare(len(_sentences(r)), relation, num_sentences)


@_check("detectable_content:number_placeholders")
def _placeholders(r: str, num_placeholders: int, **_: Any) -> bool:
    return len(re.findall(r"\[.*?\]", r)) >= num_placeholders


@_check("combination:repeat_prompt")
def _repeat(r: str, prompt_to_repeat: str, **_: Any) -> bool:
    return r.strip().lower().startswith(prompt_to_repeat.strip().lower())


@_check("detectable_format:title")
def _title(r: str, **_: Any) -> bool:
    return any(t.strip("<>").strip() for t in re.findall(r"<<[^\n]+>>", r))


@_check("change_case:english_lowercase")
def _lower(r: str, **_: Any) -> bool:
    return r == r.lower() and _language(r) == "en"


@_check("change_case:english_capital")
def _capital(r: str, **_: Any) -> bool:
    return r == r.upper() and _language(r) == "en"


@_check("change_case:capital_word_frequency")
def _capital_words(r: str, capital_frequency: int, capital_relation: str, **_: Any) -> bool:
    count = sum(1 for w in _words(r) if w.isupper())
    return _compare(count, capital_relation, capital_frequency)


@_check("detectable_format:number_bullet_lists")
def _bullets(r: str, num_bullets: int, **_: Any) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", r, re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", r, re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


@_check("detectable_format:multiple_sections")
def _sections(r: str, num_sections: int, section_spliter: str = "Section", **_: Any) -> bool:
    parts = re.split(r"\s?" + re.escape(section_spliter) + r"\s?\d+\s?", r)
    return len(parts) - 1 >= num_sections


@_check("detectable_format:json_format")
def _json(r: str, **_: Any) -> bool:
    body = re.sub(r"^```(?:json|Json|JSON)?\s*|\s*```$", "", r.strip())
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


@_check("detectable_format:constrained_response")
def _constrained(r: str, **_: Any) -> bool:
    return any(o in r for o in ("My answer is yes.", "My answer is no.", "My answer is maybe."))


@_check("length_constraints:number_paragraphs")
def _paragraphs(r: str, num_paragraphs: int, **_: Any) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", r)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index in (0, len(parts) - 1):
                count -= 1
            else:
                return False
    return count == num_paragraphs


@_check("length_constraints:nth_paragraph_first_word")
def _nth_first(r: str, num_paragraphs: int, nth_paragraph: int, first_word: str, **_: Any) -> bool:
    paragraphs = [p for p in re.split(r"\n\n", r) if p.strip()]
    if len(paragraphs) != num_paragraphs or nth_paragraph > len(paragraphs):
        return False
    words = paragraphs[nth_paragraph - 1].strip().split()
    word = re.sub(r"[^\w]", "", words[0]).lower() if words else ""
    return num_paragraphs >= nth_paragraph and word == first_word.lower()


@_check("combination:two_responses")
def _two(r: str, **_: Any) -> bool:
    parts = [p.strip() for p in r.split("******")]
    valid = [p for p in parts if p]
    blanks_inside = any(not p for p in parts[1:-1])
    return len(valid) == 2 and valid[0] != valid[1] and not blanks_inside


@_check("language:response_language")
def _lang(r: str, language: str, **_: Any) -> bool:
    return _language(r) == language


@_check("keywords:existence")
def _exists(r: str, keywords: list[str], **_: Any) -> bool:
    return all(re.search(re.escape(k), r, re.IGNORECASE) for k in keywords)


@_check("keywords:forbidden_words")
def _forbidden(r: str, forbidden_words: list[str], **_: Any) -> bool:
    return not any(
        re.search(r"\b" + re.escape(w) + r"\b", r, re.IGNORECASE) for w in forbidden_words
    )


@_check("keywords:frequency")
def _frequency(r: str, keyword: str, frequency: int, relation: str, **_: Any) -> bool:
    return _compare(len(re.findall(re.escape(keyword), r, re.IGNORECASE)), relation, frequency)


@_check("keywords:letter_frequency")
def _letters(r: str, letter: str, let_frequency: int, let_relation: str, **_: Any) -> bool:
    return _compare(r.lower().count(letter.lower()), let_relation, let_frequency)


@_check("startend:quotation")
def _quotation(r: str, **_: Any) -> bool:
    s = r.strip()
    return len(s) > 1 and s[0] == '"' and s[-1] == '"'


@_check("startend:end_checker")
def _end(r: str, end_phrase: str, **_: Any) -> bool:
    return r.strip().lower().endswith(end_phrase.strip().lower())


@_check("detectable_content:postscript")
def _postscript(r: str, postscript_marker: str, **_: Any) -> bool:
    marker = postscript_marker.strip().lower()
    if marker == "p.p.s":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "p.s.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(marker) + r".*$"
    return bool(re.findall(pattern, r.lower(), re.MULTILINE))
