"""The request path's JSON: orjson's answers where it has them, the standard library's
where orjson refuses, and NaN refused in a client's request."""

from __future__ import annotations

import json

import pytest

from rllm.producers.gateway import jsonio


@pytest.mark.parametrize(
    "text",
    [
        '{"model":"m","messages":[{"role":"user","content":"héllo ☃"}],"n":2}',
        '{"big":123456789012345678901234567890}',  # over 64 bits: orjson refuses it
        '{"lone":"\\ud800"}',  # a lone surrogate: orjson refuses it
        '{"logprob":-Infinity}',
    ],
)
def test_documents_read_as_the_standard_library_reads_them(text: str) -> None:
    assert jsonio.loads(text.encode()) == json.loads(text)


def test_a_requests_nan_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="NaN is not a JSON value"):
        jsonio.loads(b'{"temperature": NaN}', allow_nan=False)
    with pytest.raises(ValueError):
        jsonio.loads(b'{"a": }')


def test_deep_nesting_is_still_a_recursion_error() -> None:
    with pytest.raises(RecursionError):
        jsonio.loads(b"[" * 50_000 + b"]" * 50_000)


def test_dumps_writes_what_the_standard_library_writes() -> None:
    value = {"text": "héllo ☃", "ids": [1, 2, 3], "p": -0.25, "none": None, "big": 2**70}
    assert (
        jsonio.dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    )
    assert jsonio.dumps({1: "a"}) == b'{"1":"a"}'
