"""A recording reverse proxy for harness tests: it stands between a CLI agent and the
gateway on loopback, forwards every request unchanged (the ``Host`` header too, so the
gateway's session URLs point back at the proxy), and keeps what each request was: method,
path, query, a few headers and the top-level JSON fields of its body.

It is what tells a README which requests a real CLI sends; the gateway's own behaviour
is untouched.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.server import ThreadedServer

__all__ = ["RecordedRequest", "RecordingProxy"]

KEPT_HEADERS = (
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "accept",
    "content-type",
    "x-stainless-lang",
    "x-app",
)
"""Request headers worth recording (never a key)."""

_HOP = {"host", "content-length", "transfer-encoding", "connection"}


@dataclass
class RecordedRequest:
    """One request the proxy forwarded."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    """The JSON body (None when it was not a JSON object)."""
    status: int = 0
    arrived: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    """When the answer's last byte went back (``time.perf_counter``); None until then."""

    @property
    def fields(self) -> list[str]:
        """The body's top-level field names, sorted."""
        return sorted(self.body or {})

    def line(self) -> str:
        """One line for a report: method, path?query, status, notable body fields."""
        body = self.body or {}
        notes: dict[str, Any] = {
            k: body[k]
            for k in (
                "model",
                "max_tokens",
                "stream",
                "thinking",
                "max_output_tokens",
                "tool_choice",
            )
            if k in body
        }
        if "tools" in body:
            notes["tools"] = [
                t.get("name") or (t.get("function") or {}).get("name")
                for t in body["tools"]
                if isinstance(t, dict)
            ]
        target = self.path + (f"?{self.query}" if self.query else "")
        return f"{self.method} {target} -> {self.status} fields={self.fields} {json.dumps(notes)}"


class RecordingProxy(ThreadedServer):
    """Forward everything to ``target`` (a gateway's URL); ``.requests`` in arrival order."""

    def __init__(self, target: str, port: int | None = None) -> None:
        self.target = target.rstrip("/")
        self.requests: list[RecordedRequest] = []
        super().__init__(self._app(), port)

    def _app(self) -> Starlette:
        async def forward(request: Request) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            record = RecordedRequest(
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers={k: request.headers[k] for k in KEPT_HEADERS if k in request.headers},
                body=body if isinstance(body, dict) else None,
            )
            self.requests.append(record)
            headers["host"] = request.headers.get("host", "")
            client = httpx.AsyncClient(base_url=self.target, timeout=httpx.Timeout(600.0))
            upstream = client.build_request(
                request.method,
                request.url.path,
                params=request.url.query,
                headers=headers,
                content=raw,
            )
            try:
                answer = await client.send(upstream, stream=True)
            except BaseException:
                await client.aclose()
                raise
            record.status = answer.status_code
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}

            async def chunks() -> Any:
                try:
                    async for chunk in answer.aiter_raw():
                        yield chunk
                finally:  # one client a request, closed with it: nothing outlives the test
                    record.finished = time.perf_counter()
                    await answer.aclose()
                    await client.aclose()

            return StreamingResponse(chunks(), status_code=answer.status_code, headers=kept)

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
        return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])
