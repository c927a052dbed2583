"""Read request bodies within the size and time limits and check the shape each API needs."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import ClientDisconnect, Request

from rllm.producers.gateway import jsonio
from rllm.producers.gateway.errors import GatewayError
from rllm.producers.gateway.settings import GatewaySettings
from rllm.producers.gateway.types import MAX_CHOICES
from rllm.schemas.types import ApiKind

__all__ = ["TOO_DEEP", "read_json", "validate_call"]

_REQUIRED: dict[ApiKind, tuple[str, type | tuple[type, ...]]] = {
    ApiKind.CHAT: ("messages", list),
    ApiKind.COMPLETIONS: ("prompt", (str, list)),
    ApiKind.RESPONSES: ("input", (str, list)),
    ApiKind.ANTHROPIC_MESSAGES: ("messages", list),
}

TOO_DEEP = (
    "JSON body is nested too deeply for the gateway (about 900 levels at most); flatten the request"
)
"""The reason a body nested past Python's recursion limit is refused with (400)."""


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The raw body; each chunk must come within ``timeout_s`` of the previous one."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise GatewayError(413, f"request body of {declared} bytes is over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise GatewayError(413, f"request body is over the {limit}-byte limit")
                chunks.append(chunk)
                deadline.reschedule(loop.time() + timeout_s)
    except TimeoutError as exc:
        expected = f" of the {declared} its Content-Length declared" if declared else ""
        raise GatewayError(
            408,
            f"request body stopped after {size} bytes{expected}: nothing came for "
            f"{timeout_s:g} s; send the whole body (or a correct Content-Length)",
            close=True,
        ) from exc
    except ClientDisconnect as exc:
        raise GatewayError(
            400, f"the client went away after {size} bytes of the body", close=True
        ) from exc
    return b"".join(chunks)


async def read_json(request: Request, settings: GatewaySettings, allow_empty: bool = False) -> Any:
    """The request's JSON body.

    Raises:
        GatewayError: 413 over ``max_body_bytes``, 408 when the body stalls for
            ``body_timeout_s``, 400 when it is not JSON or is nested too deeply to parse.
    """
    raw = await _read_body(request, settings.max_body_bytes, settings.body_timeout_s)
    if not raw.strip():
        if allow_empty:
            return None
        raise GatewayError(400, "request body is empty; send a JSON object")
    try:
        return jsonio.loads(raw, allow_nan=False)
    except RecursionError as exc:
        raise GatewayError(400, TOO_DEEP) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise GatewayError(400, f"malformed JSON body: {exc}") from exc


def _check_items(api: ApiKind, name: str, items: list[Any]) -> None:
    """Each message (or Responses input item) must be an object; messages need a role."""
    needs_role = api is not ApiKind.RESPONSES
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise GatewayError(
                400, f"'{name}[{i}]' must be a JSON object, got {type(item).__name__} {item!r:.80}"
            )
        if needs_role and not isinstance(item.get("role"), str):
            raise GatewayError(
                400, f"'{name}[{i}]' needs a 'role' string, got {item.get('role')!r:.80}"
            )


def validate_call(api: ApiKind, body: Any) -> None:
    """Check the fields an API call cannot do without, and its ``n``.

    Raises:
        GatewayError: 400 naming the field (and the item's index) and the value.
    """
    if not isinstance(body, dict):
        raise GatewayError(400, f"request body must be a JSON object, got {type(body).__name__}")
    if not isinstance(body.get("model"), str):
        raise GatewayError(400, f"'model' must be a string, got {body.get('model')!r}")
    name, kind = _REQUIRED[api]
    value = body.get(name)
    if not isinstance(value, kind):
        raise GatewayError(
            400,
            f"{api.value} request needs '{name}' "
            f"({'a list' if kind is list else 'a string or list'}), "
            f"got {type(value).__name__}",
        )
    if isinstance(value, list) and api is not ApiKind.COMPLETIONS:
        _check_items(api, name, value)
    _check_choices(body.get("n"))


def _check_choices(n: Any) -> None:
    """``n`` (absent, null or an integer the gateway captures every choice of): a string or
    an ``n`` over ``MAX_CHOICES`` would reach the upstream, which answers every choice, while
    only the first would be captured."""
    if n is None or (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_CHOICES):
        return
    raise GatewayError(
        400,
        f"'n' must be an integer from 1 to {MAX_CHOICES} (the gateway captures each choice "
        f"as its own step, at most {MAX_CHOICES}), got {n!r:.40} ({type(n).__name__}); "
        "send fewer choices per call, as a number",
    )
