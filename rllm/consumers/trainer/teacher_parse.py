"""Parse a served teacher's answers into the logprobs of the tokens asked about
(vLLM ``prompt_logprobs``, SGLang ``input_token_logprobs``); see ``teacher``."""

from __future__ import annotations

from typing import Any

from rllm.consumers.trainer.errors import TeacherResponseError, TeacherTokenMismatchError

__all__ = ["excerpt", "parse_sglang", "parse_vllm"]


def excerpt(text: str, limit: int = 300) -> str:
    """The start of an answer body, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _logprob(value: Any, where: str, t: int) -> float:
    if isinstance(value, dict):
        value = value.get("logprob")
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TeacherResponseError(f"{where}: position {t} has logprob {value!r}, not a number")
    return float(value)


def parse_vllm(ids: list[int], start: int, data: Any, where: str) -> list[float]:
    """Logprobs of ``ids[start:]`` from a vLLM completions answer with ``prompt_logprobs``.

    Raises:
        TeacherResponseError: no ``prompt_logprobs``, or not one entry per token.
        TeacherTokenMismatchError: a position does not score the token asked about.
    """
    try:
        rows = data["choices"][0]["prompt_logprobs"]
    except (KeyError, IndexError, TypeError):
        rows = None
    if not isinstance(rows, list):
        raise TeacherResponseError(
            f"teacher {where} answered without choices[0].prompt_logprobs (does it support "
            f"vLLM's prompt_logprobs?): {excerpt(str(data))}"
        )
    if len(rows) != len(ids):
        raise TeacherResponseError(
            f"teacher {where} answered {len(rows)} prompt logprobs for {len(ids)} tokens"
        )
    out: list[float] = []
    for t in range(start, len(ids)):
        row = rows[t]
        if not isinstance(row, dict):
            raise TeacherResponseError(f"teacher {where}: position {t} has no logprobs ({row!r})")
        item = row.get(str(ids[t]), row.get(ids[t]))
        if item is None:
            raise TeacherTokenMismatchError(
                f"teacher {where}: position {t} should score token {ids[t]} but names "
                f"{sorted(row)[:5]}; teacher and student must share one tokenizer"
            )
        out.append(_logprob(item, f"teacher {where}", t))
    return out


def parse_sglang(ids: list[int], start: int, data: Any, where: str) -> list[float]:
    """Logprobs of ``ids[start:]`` from an SGLang ``/generate`` answer asked with
    ``logprob_start_len = start - 1`` (its first entry has no logprob).

    Raises:
        TeacherResponseError: no ``input_token_logprobs``, or not one entry per token.
        TeacherTokenMismatchError: an entry names another token than asked.
    """
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    try:
        rows = data["meta_info"]["input_token_logprobs"]
    except (KeyError, TypeError):
        rows = None
    if not isinstance(rows, list):
        raise TeacherResponseError(
            f"teacher {where} answered without meta_info.input_token_logprobs: {excerpt(str(data))}"
        )
    want = len(ids) - start + 1
    if len(rows) != want:
        raise TeacherResponseError(
            f"teacher {where} answered {len(rows)} input logprobs; {want} expected for "
            f"{len(ids)} tokens from position {start - 1}"
        )
    out: list[float] = []
    for t, row in zip(range(start, len(ids)), rows[1:], strict=True):
        if not isinstance(row, list | tuple) or len(row) < 2:
            raise TeacherResponseError(f"teacher {where}: position {t} has entry {row!r}")
        if row[1] != ids[t]:
            raise TeacherTokenMismatchError(
                f"teacher {where}: position {t} should score token {ids[t]} but names "
                f"{row[1]!r}; teacher and student must share one tokenizer"
            )
        out.append(_logprob(row[0], f"teacher {where}", t))
    return out
