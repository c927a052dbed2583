"""JSON on the gateway's request path: orjson (a tenth of the standard library's time on a
chat request), with the standard library for what orjson refuses or reads otherwise, so
every document reads and writes as it did: integers over 64 bits (which orjson would read
as floats), lone surrogates, non-string keys, and nesting past orjson's 1,024 levels (which
the standard library then refuses with RecursionError). A client's request (``strict``) is
refused what no JSON answer or UTF-8 body can hold: NaN, Infinity, a number out of a
double's range (``1e400``, which would read as infinity) and a lone surrogate (``"\\ud800"``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
from starlette.responses import JSONResponse

from rllm.producers.gateway.errors import UnreadableRequestError

__all__ = ["JsonAnswer", "dumps", "loads"]


_DIGITS = bytes.maketrans(b"012345678", b"999999999")
_LONG_NUMBER = b"9" * 20
"""Twenty digits in a row, once every digit reads 9: perhaps an integer past 64 bits (or
digits in a string; either way the standard library reads the document). A translate and a
search take ~2 us on a chat request, a regular expression ten times that."""


def _constant(name: str) -> NoReturn:
    raise UnreadableRequestError(f"{name} is not a JSON value; send a number or null")


@dataclass(frozen=True)
class _OutOfRange:
    """A number a double cannot hold, as written (found and named after the parse)."""

    text: str


def _finite(text: str) -> float | _OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else _OutOfRange(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _where(path: tuple[str | int, ...]) -> str:
    """``messages[0].content`` for a path of keys and indices; ``the body`` for none."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f"'{text}'" if text else "the body"


def _unwritable(value: Any) -> str | None:
    """Why a parsed request cannot be sent on (a number out of range, a lone surrogate),
    naming the first such value's place; None when it can."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _OutOfRange):
            text = (
                item.text
                if len(item.text) <= 40
                else f"{item.text[:40]}... ({len(item.text)} characters)"
            )
            return (
                f"{_where(path)} is {text}, out of a double's range (it would read as "
                "infinity); send a finite number or null"
            )
        if isinstance(item, str):
            bad = _SURROGATE.search(item)
            if bad is not None:
                return (
                    f"{_where(path)} holds a lone surrogate (\\u{ord(bad.group()):04x}), which "
                    "UTF-8 cannot encode; send valid Unicode text (a \\ud800-\\udbff escape "
                    "must be followed by a \\udc00-\\udfff one)"
                )
        elif isinstance(item, dict):
            for key, member in reversed(item.items()):
                if _SURROGATE.search(key) is not None:
                    return f"a key in {_where(path)} holds a lone surrogate; send valid Unicode"
                stack.append((member, (*path, key)))
        elif isinstance(item, list):
            stack.extend((member, (*path, i)) for i, member in reversed(list(enumerate(item))))
    return None


def loads(data: bytes | str, allow_nan: bool = True) -> Any:
    """Parse a JSON document; ``allow_nan`` reads NaN and Infinity (and numbers past a
    double's range) as floats and lone surrogates as they are, as the standard library
    does (an upstream's answer), else they are refused (a client's request: no JSON answer
    can hold them, and no UTF-8 request to the upstream).

    Raises:
        UnreadableRequestError: not JSON; when not ``allow_nan``, also NaN, Infinity, a
            number out of a double's range or a lone surrogate, named with its place.
        RecursionError: nested past the interpreter's recursion limit.
    """
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)  # refuses all four
        except orjson.JSONDecodeError:
            pass
    if allow_nan:
        return json.loads(raw)
    value = json.loads(raw, parse_constant=_constant, parse_float=_finite)
    reason = _unwritable(value)
    if reason is not None:
        raise UnreadableRequestError(reason)
    return value


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
