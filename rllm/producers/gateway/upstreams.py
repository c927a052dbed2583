"""The upstream model server behind an ``httpx.AsyncClient`` on the gateway's own
connection stack (``transport.UpstreamStack``; tests serve loopback sockets, never swap it).

Failures become ``UpstreamFailure`` with the status and body the agent should get.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from rllm.producers.gateway import jsonio
from rllm.producers.gateway.context import ContextWindow
from rllm.producers.gateway.errors import UpstreamFailure
from rllm.producers.gateway.http1 import Answer
from rllm.producers.gateway.settings import GatewaySettings, UpstreamKind
from rllm.producers.gateway.sglang import SglangGenerate, load_tokenizer
from rllm.producers.gateway.transport import UpstreamStack

__all__ = ["FORWARD_HEADERS", "Upstream", "UpstreamFailure", "error_body"]

_T = TypeVar("_T")

FORWARD_HEADERS = ("anthropic-version", "anthropic-beta", "openai-organization", "openai-beta")


def error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "code": status}}


class Upstream:
    """One upstream: base URL, kind, key, and a pooled async client.

    Args:
        settings: the gateway's settings.
        tokenizer: the model's tokenizer for an sglang upstream (loaded from
            ``settings.tokenizer`` when not given, so never on a first request).
        url: the server's base URL (a replica's), by default ``settings.upstream_url``.

    Raises:
        ConfigError: an sglang upstream whose tokenizer cannot be loaded.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        tokenizer: Any = None,
        url: str | None = None,
    ) -> None:
        self.kind = settings.upstream_kind
        self.sglang: SglangGenerate | None = None
        if self.kind is UpstreamKind.SGLANG:
            loaded = tokenizer if tokenizer is not None else load_tokenizer(settings.tokenizer)
            self.sglang = SglangGenerate(loaded)
        self.streams = settings.upstream_streams
        """Whether streamed calls are streamed upstream (else answered whole, then sent)."""
        self.url = url or settings.upstream_url
        headers = {}
        if settings.upstream_api_key is not None:
            key = settings.upstream_api_key.get_secret_value()
            headers = {"authorization": f"Bearer {key}", "x-api-key": key}
        self.stack = UpstreamStack(max_connections=1000)
        self.client = httpx.AsyncClient(
            base_url=self.url,
            transport=self.stack.transport,
            headers=headers,
            timeout=httpx.Timeout(settings.upstream_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        # the calls themselves skip the client's send pipeline (URL merging, cookies,
        # auth and redirect handling: ~0.4 ms a call) and go to the transport it would
        # pick for the upstream (a proxy's, when the environment names one)
        self.transport = self.client._transport_for_url(self.client.base_url)
        """Where streams and calls go: the stack's transport, or a proxy's."""
        self._base_headers = dict(self.client.headers)
        self._timeout = self.client.timeout.as_dict()
        self._urls: dict[str, httpx.URL] = {}
        self._pool = self.stack.pool if self.transport is self.stack.transport else None
        """Whole answers' connections, when the calls go to the upstream (not a proxy)."""
        self.context = ContextWindow(self)
        """Its context length, and prompt lengths when a call needs them."""

    @property
    def captures_tokens(self) -> bool:
        """Whether this upstream returns token IDs."""
        return self.kind is not UpstreamKind.HOSTED

    def _failure(self, exc: httpx.HTTPError) -> UpstreamFailure:
        if isinstance(exc, httpx.TimeoutException):
            kind, status = "upstream_timeout", 504
            msg = f"upstream {self.url} timed out ({type(exc).__name__})"
        else:
            kind, status = "upstream_unreachable", 502
            msg = f"upstream {self.url} unreachable ({type(exc).__name__}: {exc})"
        return UpstreamFailure(
            kind, status, json.dumps(error_body(msg, kind, status)).encode(), msg
        )

    def _headers(self, incoming: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in incoming.items() if k in FORWARD_HEADERS}

    def _url(self, path: str) -> httpx.URL:
        """``path`` under the base URL's path (which the client ends in "/"), as the
        client merges them."""
        url = self._urls.get(path)
        if url is None:
            base = self.client.base_url
            raw = base.raw_path + path.lstrip("/").encode("ascii")
            url = self._urls[path] = base.copy_with(raw_path=raw)
        return url

    async def _retrying(self, send: Callable[[], Awaitable[_T]]) -> _T:
        """``send()``; again once when a pooled keep-alive connection was closed by the
        server before it answered (nothing reached the model).

        Raises:
            UpstreamFailure: the transport's error (timeout, unreachable, broken answer).
        """
        for attempt in (0, 1):
            try:
                return await send()
            except httpx.RemoteProtocolError as exc:
                if attempt or "without sending" not in str(exc):
                    raise self._failure(exc) from exc
            except httpx.HTTPError as exc:
                raise self._failure(exc) from exc
        raise AssertionError("unreachable")

    def _post(
        self, path: str, body: dict[str, Any], incoming: dict[str, str]
    ) -> tuple[dict[str, str], bytes]:
        """The headers and body of a JSON POST (what ``client.build_request`` sends)."""
        headers = {**self._base_headers, **self._headers(incoming)}
        headers["content-type"] = "application/json"
        return headers, jsonio.dumps(body)

    async def _send(
        self, path: str, body: dict[str, Any], incoming: dict[str, str]
    ) -> httpx.Response:
        """POST through the transport, once; return the open response (the caller
        closes it)."""
        headers, content = self._post(path, body, incoming)
        request = httpx.Request(
            "POST",
            self._url(path),
            headers=headers,
            content=content,
            extensions={"timeout": self._timeout},
        )
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def _whole(self, path: str, body: dict[str, Any], incoming: dict[str, str]) -> Answer:
        """POST and read the whole answer (decoded from its ``Content-Encoding``): through
        the keep-alive pool when there is one, else through the transport's httpx
        response."""
        pool = self._pool
        if pool is not None:
            headers, content = self._post(path, body, incoming)
            url = str(self._url(path))
            answer = await self._retrying(lambda: pool.post(url, headers, content, self._timeout))
            if answer.headers.get("content-encoding", "identity") != "identity":
                raw = list(answer.headers.items())
                decoded = httpx.Response(answer.status, headers=raw, content=answer.content)
                answer = answer._replace(content=decoded.content)
            return answer

        async def read() -> Answer:
            resp = await self._send(path, body, incoming)
            try:
                await resp.aread()
            finally:
                await resp.aclose()
            return Answer(resp.status_code, dict(resp.headers), resp.content)

        return await self._retrying(read)

    async def post_json(
        self,
        path: str,
        body: dict[str, Any],
        incoming: dict[str, str],
        answer_headers: dict[str, str] | None = None,
    ) -> Any:
        """POST and return the parsed JSON answer (its headers, by lower-case name, into
        ``answer_headers``).

        Raises:
            UpstreamFailure: non-2xx status, timeout, unreachable, or a body that is not JSON.
        """
        answer = await self._whole(path, body, incoming)
        if answer_headers is not None:
            answer_headers.update(answer.headers)
        if answer.status >= 400:
            text = answer.content.decode("utf-8", "replace")
            raise UpstreamFailure(
                "upstream_status",
                answer.status,
                answer.content,
                f"upstream answered {answer.status}: {text[:500]}",
                answer.headers.get("content-type", "application/json"),
            )
        try:
            return jsonio.loads(answer.content)
        except ValueError as exc:
            text = answer.content.decode("utf-8", "replace")
            raise UpstreamFailure(
                "invalid_response",
                502,
                answer.content,
                f"upstream answer is not JSON: {text[:200]!r}",
            ) from exc

    async def open_stream(
        self, path: str, body: dict[str, Any], incoming: dict[str, str]
    ) -> httpx.Response:
        """POST a streaming request; return the open response (2xx only; caller closes it).

        Raises:
            UpstreamFailure: non-2xx status, timeout or unreachable.
        """
        resp = await self._retrying(lambda: self._send(path, body, incoming))
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
        """Close the connection pools."""
        await self.stack.pool.aclose()
        await self.client.aclose()
