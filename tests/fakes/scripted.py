"""A scripted model upstream for harness tests: it answers each turn of a conversation from
a script, in OpenAI chat format with vLLM-style token IDs and logprobs (the fake tokenizer
of ``tests.fakes.upstream``: UTF-8 bytes plus 3).

The turn is the number of assistant messages already in the request, so concurrent
sessions each walk the script from its start; past its end the last line repeats. A line
``tool:NAME {json arguments}`` answers with that tool call (OpenAI format, finish reason
``tool_calls``); any other line is the reply's text.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import ThreadedServer
from tests.fakes.upstream import _respond, chat_prompt_text

__all__ = ["ScriptedUpstream", "start_scripted_upstream"]


class ScriptedUpstream(ThreadedServer):
    """The scripted server in a thread: ``.url``, ``.requests`` (bodies in arrival order)
    and ``.arrivals`` (``time.perf_counter()`` of each)."""

    def __init__(self, script: list[str], port: int | None = None) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        super().__init__(self._app(), port)

    def answer(self, messages: list[dict[str, Any]]) -> str:
        """The script's line for this conversation's turn."""
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return self.script[min(turn, len(self.script) - 1)]

    def _app(self) -> Starlette:
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.arrivals.append(time.perf_counter())
            self.requests.append(body)
            messages = body.get("messages") or []
            text, call = _parse(self.answer(messages), len(self.requests))
            return _respond(body, "chat", chat_prompt_text(messages), text, call)

        async def models(request: Request) -> Response:
            return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

        return Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/models", models, methods=["GET"]),
            ]
        )


def _parse(line: str, n: int) -> tuple[str, dict[str, Any] | None]:
    """A script line's text and tool call (None for a plain reply)."""
    if not line.startswith("tool:"):
        return line, None
    name, _, arguments = line.removeprefix("tool:").partition(" ")
    function = {"name": name, "arguments": json.dumps(json.loads(arguments or "{}"))}
    call = {"id": f"call_{n}", "type": "function", "function": function}
    return json.dumps(function, sort_keys=True), call


def start_scripted_upstream(script: list[str], port: int | None = None) -> ScriptedUpstream:
    """Serve ``script`` on ``port`` (a free one if None)."""
    return ScriptedUpstream(script, port)
