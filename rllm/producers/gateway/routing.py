"""Parse gateway paths: ``/sessions/{id}/v1/{api}`` (ids may hold ``/`` and ``:``),
``/sessions/{id}/close``, keys from ``Authorization`` or ``x-api-key``, and a URL's query
as a step may record it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

__all__ = ["Route", "parse_session_path", "redacted_query", "request_key"]

_SECRET = re.compile(r"key|token|secret|auth|sig", re.IGNORECASE)


@dataclass(frozen=True)
class Route:
    """What a ``/sessions/...`` path asks for."""

    session_id: str
    action: str
    """``v1`` (an API call), ``close`` or ``info``."""
    api_path: str = ""
    """The API path after ``/v1/`` (``chat/completions``, ``messages``, ``models``, ...)."""


def parse_session_path(rest: str) -> Route | None:
    """Parse what follows ``/sessions/``; None when it names no session."""
    sid, sep, api = rest.rpartition("/v1/")
    if sep and sid:
        return Route(sid, "v1", api.strip("/"))
    if rest.endswith("/v1") and len(rest) > 3:
        return Route(rest[:-3], "v1", "")
    if rest.endswith("/close") and len(rest) > 6:
        return Route(rest[:-6], "close")
    if rest and not rest.endswith("/"):
        return Route(rest, "info")
    return None


def request_key(headers: dict[str, str]) -> str | None:
    """The caller's key: ``Authorization: Bearer <key>`` or ``x-api-key``."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    return headers.get("x-api-key") or None


def redacted_query(query: str) -> str:
    """A URL's query with the values of parameters that may hold a secret (``api-key``,
    ``token``, ...) replaced by ``***``."""
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, "***" if _SECRET.search(k) else v) for k, v in pairs], safe="*")
