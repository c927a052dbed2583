"""JSON on the gateway's request path: orjson (a tenth of the standard library's time on a
chat request), with the standard library for what orjson refuses or reads otherwise, so
every document reads and writes as it did: integers over 64 bits (which orjson would read
as floats), lone surrogates, non-string keys, and nesting past orjson's 1,024 levels (which
the standard library then refuses with RecursionError).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import orjson
from starlette.responses import JSONResponse

__all__ = ["JsonAnswer", "dumps", "loads"]


_DIGITS = bytes.maketrans(b"012345678", b"999999999")
_LONG_NUMBER = b"9" * 20
"""Twenty digits in a row, once every digit reads 9: perhaps an integer past 64 bits (or
digits in a string; either way the standard library reads the document). A translate and a
search take ~2 us on a chat request, a regular expression ten times that."""


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value; send a number or null")


def loads(data: bytes | str, allow_nan: bool = True) -> Any:
    """Parse a JSON document; ``allow_nan`` reads NaN and Infinity as floats, as the
    standard library does (an upstream's answer), else they are refused (a client's
    request: no JSON answer can hold them).

    Raises:
        ValueError: not JSON (NaN or Infinity too, when not ``allow_nan``).
        RecursionError: nested past the interpreter's recursion limit.
    """
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    if allow_nan:
        return json.loads(raw)
    return json.loads(raw, parse_constant=_constant)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (what ``json.dumps(value, ensure_ascii=False,
    separators=(",", ":"))`` writes, encoded).

    NaN and Infinity are written as null (the standard library would refuse them).

    Raises:
        TypeError: a value JSON has no form for.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.encode()


class JsonAnswer(JSONResponse):
    """A JSON answer written by ``dumps``."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
