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


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '{"temperature": 1e400}',
            "'temperature' is 1e400, out of a double's range (it would read as infinity); "
            "send a finite number or null",
        ),
        (
            '{"logit_bias": {"7": -1e999}}',
            "'logit_bias.7' is -1e999, out of a double's range",
        ),
        (
            '{"p": [0.5, 1' + "0" * 400 + ".0]}",  # the long-number path
            "'p[1]' is 1000000000000000000000000000000000000000... (403 characters), out of",
        ),
        (
            '{"messages": [{"role": "user", "content": "a\\ud800b"}]}',
            "'messages[0].content' holds a lone surrogate (\\ud800), which UTF-8 cannot encode",
        ),
        ('{"a\\udc00": 1}', "a key in the body holds a lone surrogate"),
        ('{"t": Infinity}', "Infinity is not a JSON value; send a number or null"),
    ],
)
def test_a_request_is_refused_what_it_could_not_send_on(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        jsonio.loads(text.encode(), allow_nan=False)
    assert str(info.value).startswith(reason)


def test_a_request_keeps_what_it_can_send_on() -> None:
    text = '{"x": [1e-400, 1.5, "\\ud83d\\ude00"], "seed": 123456789012345678901234567890}'
    assert jsonio.loads(text.encode(), allow_nan=False) == {
        "x": [0.0, 1.5, "\U0001f600"],
        "seed": 123456789012345678901234567890,
    }
    assert jsonio.loads(b'{"t": 1e400}') == {"t": float("inf")}  # an upstream's answer
