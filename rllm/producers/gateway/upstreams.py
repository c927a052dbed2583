"""The upstream model server behind an ``httpx.AsyncClient`` (transport replaceable in tests).

Failures become ``UpstreamFailure`` with the status and body the agent should get.
"""

from __future__ import annotations

from typing import Any

import httpx

from .context import ContextWindow
from .errors import UpstreamFailure
from .settings import GatewaySettings, UpstreamKind
from .sglang import SglangGenerate, load_tokenizer

__all__ = ["FORWARD_HEADERS", "Upstream", "UpstreamFailure", "error_body"]

FORWARD_HEADERS = ("anthropic-version", "anthropic-beta", "openai-organization", "openai-beta")


def error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "code": status}}


class Upstream:
    """One upstream: base URL, kind, key, and a pooled async client.

    Args:
        settings: the gateway's settings.
        transport: replaces the network (tests).
        tokenizer: the model's tokenizer for an sglang upstream (loaded from
            ``settings.tokenizer`` when not given, so never on a first request).

    Raises:
        ConfigError: an sglang upstream whose tokenizer cannot be loaded.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        transport: httpx.AsyncBaseTransport | None = None,
        tokenizer: Any = None,
    ) -> None:
        self.kind = settings.upstream_kind
        self.sglang: SglangGenerate | None = None
        if self.kind is UpstreamKind.SGLANG:
            loaded = tokenizer if tokenizer is not None else load_tokenizer(settings.tokenizer)
            self.sglang = SglangGenerate(loaded)
        self.streams = settings.upstream_streams
        """Whether streamed calls are streamed upstream (else answered whole, then sent)."""
        self.url = settings.upstream_url
        headers = {}
        if settings.upstream_api_key is not None:
            key = settings.upstream_api_key.get_secret_value()
            headers = {"authorization": f"Bearer {key}", "x-api-key": key}
        self.client = httpx.AsyncClient(
            base_url=self.url,
            transport=transport,
            headers=headers,
            timeout=httpx.Timeout(settings.upstream_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        self.context = ContextWindow(self)
        """Its context length, and prompt lengths when a call needs them."""

    @property
    def captures_tokens(self) -> bool:
        """Whether this upstream returns token IDs."""
        return self.kind is not UpstreamKind.HOSTED

    def _failure(self, exc: httpx.HTTPError) -> UpstreamFailure:
        import json

        if isinstance(exc, httpx.TimeoutException):
            msg = f"upstream {self.url} timed out ({type(exc).__name__})"
            return UpstreamFailure(
                "upstream_timeout",
                504,
                json.dumps(error_body(msg, "upstream_timeout", 504)).encode(),
                msg,
            )
        msg = f"upstream {self.url} unreachable ({type(exc).__name__}: {exc})"
        return UpstreamFailure(
            "upstream_unreachable",
            502,
            json.dumps(error_body(msg, "upstream_unreachable", 502)).encode(),
            msg,
        )

    def _headers(self, incoming: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in incoming.items() if k in FORWARD_HEADERS}

    async def _send(self, req: httpx.Request, stream: bool) -> httpx.Response:
        """Send; retry once when a pooled keep-alive connection was closed by the server
        before it answered (nothing reached the model)."""
        for attempt in (0, 1):
            try:
                return await self.client.send(req, stream=stream)
            except httpx.RemoteProtocolError as exc:
                if attempt or "without sending" not in str(exc):
                    raise self._failure(exc) from exc
            except httpx.HTTPError as exc:
                raise self._failure(exc) from exc
        raise AssertionError("unreachable")

    async def post_json(
        self,
        path: str,
        body: dict[str, Any],
        incoming: dict[str, str],
        answer_headers: dict[str, str] | None = None,
    ) -> Any:
        """POST and return the parsed JSON answer (its headers into ``answer_headers``).

        Raises:
            UpstreamFailure: non-2xx status, timeout, unreachable, or a body that is not JSON.
        """
        req = self.client.build_request("POST", path, json=body, headers=self._headers(incoming))
        resp = await self._send(req, stream=False)
        if answer_headers is not None:
            answer_headers.update(resp.headers)
        if resp.status_code >= 400:
            raise UpstreamFailure(
                "upstream_status",
                resp.status_code,
                resp.content,
                f"upstream answered {resp.status_code}: {resp.text[:500]}",
                resp.headers.get("content-type", "application/json"),
            )
        try:
            return resp.json()
        except ValueError as exc:
            raise UpstreamFailure(
                "invalid_response",
                502,
                resp.content,
                f"upstream answer is not JSON: {resp.text[:200]!r}",
            ) from exc

    async def open_stream(
        self, path: str, body: dict[str, Any], incoming: dict[str, str]
    ) -> httpx.Response:
        """POST a streaming request; return the open response (2xx only; caller closes it).

        Raises:
            UpstreamFailure: non-2xx status, timeout or unreachable.
        """
        req = self.client.build_request("POST", path, json=body, headers=self._headers(incoming))
        resp = await self._send(req, stream=True)
        if resp.status_code >= 400:
            content = await resp.aread()
            await resp.aclose()
            raise UpstreamFailure(
                "upstream_status",
                resp.status_code,
                content,
                f"upstream answered {resp.status_code}: {content[:500]!r}",
                resp.headers.get("content-type", "application/json"),
            )
        return resp

    async def forward(
        self, method: str, path: str, content: bytes, incoming: dict[str, str]
    ) -> httpx.Response:
        """Forward a request as-is (models listing, hosted passthrough)."""
        headers = self._headers(incoming)
        if content:
            headers["content-type"] = "application/json"
        try:
            return await self.client.request(method, path, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise self._failure(exc) from exc

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
