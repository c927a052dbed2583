"""Adapters of the vision benchmarks: images as data URLs, lettered options."""

from __future__ import annotations

import base64
import re
from typing import Any

from rllm.benchmarks.adapters import (
    ADAPTERS,
    LETTERS,
    Vars,
    adapter,
    as_list,
    choices_vars,
    lettered,
)
from rllm.benchmarks.errors import DatasetRowError

__all__ = ["data_url"]


# --- vision -------------------------------------------------------------------------------


def data_url(image: Any) -> str:
    """An HF ``Image`` value (``{"bytes": ..., "path": ...}``) as a base64 data URL."""
    if isinstance(image, dict) and image.get("bytes") is not None:
        raw = image["bytes"]
        raw = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
        kind = "png" if raw.startswith(b"\x89PNG") else "jpeg"
        return f"data:image/{kind};base64,{base64.b64encode(raw).decode()}"
    if isinstance(image, dict) and image.get("path"):
        return str(image["path"])
    if isinstance(image, str):
        return image
    raise DatasetRowError(f"image value of type {type(image).__name__} has neither bytes nor path")


@adapter("images")
def _images(v: Vars) -> Vars:
    keys = sorted(k for k in v if re.fullmatch(r"image(_\d+)?", k) and v[k] is not None)
    if not keys:
        raise DatasetRowError("the row has no image")
    return {"images": [data_url(v[k]) for k in keys]}


@adapter("vqa_choices")
def _vqa_choices(v: Vars) -> Vars:
    out = _images(v)
    options = v.get("choices")
    if options in (None, "", [], "[]"):
        return {**out, "choices_text": "", "answer": v["answer"]}
    choices = as_list(options, "choices")
    answer = str(v["answer"]).strip()
    if answer in [str(c) for c in choices]:
        index = [str(c) for c in choices].index(answer)
    elif answer.isdigit():
        index = int(answer)
    else:
        index = LETTERS.index(answer.upper())
    return {**out, **choices_vars(v, choices, index), "choices_text": "\n" + lettered(choices)}


@adapter("vqa_columns")
def _vqa_columns(v: Vars) -> Vars:
    return {**_images(v), **ADAPTERS["column_choices"](v)}
