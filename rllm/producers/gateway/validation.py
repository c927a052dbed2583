"""Read request bodies within the size limit and check the shape each API needs."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from rllm.schemas.types import ApiKind

from .errors import GatewayError

__all__ = ["read_json", "validate_call"]

_REQUIRED: dict[ApiKind, tuple[str, type | tuple[type, ...]]] = {
    ApiKind.CHAT: ("messages", list),
    ApiKind.COMPLETIONS: ("prompt", (str, list)),
    ApiKind.RESPONSES: ("input", (str, list)),
    ApiKind.ANTHROPIC_MESSAGES: ("messages", list),
}


async def read_json(request: Request, limit: int, allow_empty: bool = False) -> Any:
    """The request's JSON body.

    Raises:
        GatewayError: 413 over ``limit`` bytes, 400 when it is not JSON.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise GatewayError(413, f"request body of {declared} bytes is over the {limit}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError(413, f"request body is over the {limit}-byte limit")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        if allow_empty:
            return None
        raise GatewayError(400, "request body is empty; send a JSON object")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GatewayError(400, f"malformed JSON body: {exc}") from exc


def validate_call(api: ApiKind, body: Any) -> None:
    """Check the fields an API call cannot do without.

    Raises:
        GatewayError: 400 naming the field and the value.
    """
    if not isinstance(body, dict):
        raise GatewayError(400, f"request body must be a JSON object, got {type(body).__name__}")
    if not isinstance(body.get("model"), str):
        raise GatewayError(400, f"'model' must be a string, got {body.get('model')!r}")
    name, kind = _REQUIRED[api]
    if not isinstance(body.get(name), kind):
        raise GatewayError(
            400,
            f"{api.value} request needs '{name}' "
            f"({'a list' if kind is list else 'a string or list'}), "
            f"got {type(body.get(name)).__name__}",
        )
