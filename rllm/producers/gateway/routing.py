"""Parse gateway paths: ``/sessions/{id}/v1/{api}`` (ids may hold ``/`` and ``:``),
``/sessions/{id}/close``, keys from ``Authorization`` or ``x-api-key``, and a URL's query
as a step may record it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

__all__ = ["Route", "parse_session_path", "redacted_query", "request_key", "unaddressable"]

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


def unaddressable(session_id: str) -> str | None:
    """Why a session id cannot be opened: one of its paths would not parse back to it (an
    id holding ``/v1/``, or ending in ``/v1``, ``/close`` or ``/``, could be called but not
    closed or shown); None when every path does.
    """
    sid = session_id
    if (
        parse_session_path(f"{sid}/v1/chat/completions") == Route(sid, "v1", "chat/completions")
        and parse_session_path(f"{sid}/close") == Route(sid, "close")
        and parse_session_path(sid) == Route(sid, "info")
    ):
        return None
    return (
        f"session id {sid!r} cannot be used in the gateway's paths: /sessions/{{id}}/close "
        "and /sessions/{id} would not reach it (an id may not hold '/v1/' nor end in '/v1', "
        "'/close' or '/'); choose another id"
    )


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
