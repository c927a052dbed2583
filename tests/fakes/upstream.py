"""A deterministic OpenAI-compatible model server, vLLM-flavoured, for tests and perf scripts.

It is a test double of the model server only. Tokens are bytes: a text's token IDs are its
UTF-8 bytes plus 3, so a chat prompt that extends an earlier prompt and its answer extends
its token IDs too (as a real chat template does). It honours vLLM's ``return_token_ids``
(top-level ``prompt_token_ids``, per-choice ``token_ids``) and ``logprobs``, for chat and
completions, streaming or not.

``POST /generate`` is SGLang's native endpoint: it answers the last input ID + 1 and + 2,
then 2 (end), with logprobs when ``return_logprob`` is set.

Special models: ``error-500`` answers 500, ``error-400`` answers 400, ``slow-N`` sleeps N
seconds first. A request with ``tools`` whose last message is from the user gets a tool call.

Use ``start_fake_upstream(port) -> base URL`` (uvicorn in a thread), or
``python -m tests.fakes.upstream --port N``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rllm.schemas.lineage import POLICY_HEADER
from tests.fakes.server import ThreadedServer, free_port

__all__ = [
    "FakeUpstream",
    "RunningUpstream",
    "ThreadedServer",
    "answer_text",
    "chat_prompt_text",
    "create_fake_app",
    "free_port",
    "start_fake_upstream",
    "tokenize",
]


def tokenize(text: str) -> list[int]:
    """The fake tokenizer: UTF-8 bytes plus 3."""
    return [b + 3 for b in text.encode("utf-8")]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def chat_prompt_text(messages: list[dict[str, Any]]) -> str:
    """The fake chat template: ``<role>content</s>`` per message, then ``<assistant>``."""
    parts = []
    for m in messages:
        text = _content_text(m.get("content"))
        for call in m.get("tool_calls") or []:
            text += json.dumps(call.get("function", {}), sort_keys=True)
        parts.append(f"<{m.get('role', 'user')}>{text}</s>")
    return "".join(parts) + "<assistant>"


def answer_text(prompt: str, max_tokens: int | None) -> str:
    """The deterministic answer: ``ok:`` and the prompt's last 12 characters, cut to max_tokens."""
    tail = prompt[-12:].replace("<assistant>", "")
    text = f"ok:{tail}"
    return (
        text
        if max_tokens is None
        else text.encode()[: max(max_tokens, 0)].decode("utf-8", "ignore")
    )


def _logprob(i: int) -> float:
    return -round(0.05 * (i % 7 + 1), 4)


class FakeUpstream:
    """The fake server's state: every request body it received, in order."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.served_version: int | None = None
        """When set, answers carry the local model server's policy header with it."""

    def stamp(self, resp: Response) -> Response:
        """Add the policy header the local model server sends (when ``served_version``)."""
        if self.served_version is not None:
            resp.headers[POLICY_HEADER] = str(self.served_version)
        return resp


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "fake_error", "code": status}}, status_code=status
    )


async def _special(model: str) -> Response | None:
    if model == "error-500":
        return _error(500, "fake upstream failure")
    if model == "error-400":
        return _error(400, "fake bad request")
    if model.startswith("slow-"):
        await asyncio.sleep(float(model.split("-", 1)[1]))
    return None


def _tool_call(tools: list[dict[str, Any]]) -> dict[str, Any]:
    name = tools[0].get("function", {}).get("name", "tool")
    return {
        "id": "call_0",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"x": 1})},
    }


def create_fake_app(state: FakeUpstream | None = None) -> Starlette:
    """The fake server as an ASGI app."""
    state = state or FakeUpstream()

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def chat(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        model = str(body.get("model", ""))
        special = await _special(model)
        if special is not None:
            return special
        messages = body.get("messages") or []
        prompt = chat_prompt_text(messages)
        tools = body.get("tools") or []
        tool_call = None
        last_role = messages[-1].get("role") if messages else None
        if tools and body.get("tool_choice") != "none" and last_role == "user":
            tool_call = _tool_call(tools)
            text = json.dumps(tool_call["function"], sort_keys=True)
        else:
            text = answer_text(prompt, body.get("max_tokens") or body.get("max_completion_tokens"))
        return state.stamp(_respond(body, "chat", prompt, text, tool_call))

    async def completions(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        special = await _special(str(body.get("model", "")))
        if special is not None:
            return special
        prompt = body.get("prompt", "")
        prompt = prompt[0] if isinstance(prompt, list) else prompt
        text = answer_text(str(prompt), body.get("max_tokens", 16))
        return state.stamp(_respond(body, "completions", str(prompt), text, None))

    async def generate(request: Request) -> Response:
        """SGLang's native endpoint: token IDs in, token IDs and logprobs out."""
        body = await request.json()
        state.requests.append(body)
        ids_in = [int(i) for i in body["input_ids"]]
        cap = (body.get("sampling_params") or {}).get("max_new_tokens")
        out_ids = [ids_in[-1] + 1, ids_in[-1] + 2, 2][: cap if cap is not None else 3]
        finish = {"type": "length" if len(out_ids) < 3 else "stop"}
        logprobs = (
            [[_logprob(i), t, None] for i, t in enumerate(out_ids)]
            if body.get("return_logprob")
            else None
        )
        return JSONResponse(
            {
                "text": "ok done"[: 3 * len(out_ids)],
                "output_ids": out_ids,
                "meta_info": {
                    "prompt_tokens": len(ids_in),
                    "completion_tokens": len(out_ids),
                    "finish_reason": finish,
                    "output_token_logprobs": logprobs,
                },
            }
        )

    return Starlette(
        routes=[
            Route("/generate", generate, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )


def _respond(
    body: dict[str, Any], api: str, prompt: str, text: str, tool_call: dict[str, Any] | None
) -> Response:
    prompt_ids = tokenize(prompt)
    ids = tokenize(text)
    cap = body.get("max_tokens")
    finish = (
        "tool_calls" if tool_call else ("length" if cap is not None and len(ids) >= cap else "stop")
    )
    want_ids = bool(body.get("return_token_ids"))
    lp = body.get("logprobs")
    want_lp = lp is not None and lp is not False
    usage = {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": len(ids),
        "total_tokens": len(prompt_ids) + len(ids),
    }
    created = int(time.time())
    if body.get("stream"):
        return StreamingResponse(
            _stream(
                body,
                api,
                prompt_ids,
                text,
                ids,
                finish,
                tool_call,
                want_ids,
                want_lp,
                usage,
                created,
            ),
            media_type="text/event-stream",
        )
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if api == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": None if tool_call else text}
        if tool_call:
            message["tool_calls"] = [tool_call]
        choice["message"] = message
        if want_lp:
            choice["logprobs"] = {
                "content": [
                    {
                        "token": chr(t - 3) if t - 3 < 128 else "?",
                        "logprob": _logprob(i),
                        "bytes": [t - 3],
                        "top_logprobs": [],
                    }
                    for i, t in enumerate(ids)
                ]
            }
    else:
        choice["text"] = text
        if want_lp:
            choice["logprobs"] = {
                "tokens": [chr(t - 3) for t in ids],
                "token_logprobs": [_logprob(i) for i in range(len(ids))],
                "top_logprobs": None,
                "text_offset": list(range(len(ids))),
            }
    out: dict[str, Any] = {
        "id": "fake-1",
        "object": "chat.completion" if api == "chat" else "text_completion",
        "created": created,
        "model": body.get("model"),
        "choices": [choice],
        "usage": usage,
    }
    if want_ids:
        choice["token_ids"] = ids
        if api == "chat":
            out["prompt_token_ids"] = prompt_ids
        else:
            choice["prompt_token_ids"] = prompt_ids
    return JSONResponse(out)


async def _stream(
    body: dict[str, Any],
    api: str,
    prompt_ids: list[int],
    text: str,
    ids: list[int],
    finish: str,
    tool_call: dict[str, Any] | None,
    want_ids: bool,
    want_lp: bool,
    usage: dict[str, int],
    created: int,
) -> AsyncIterator[bytes]:
    obj = "chat.completion.chunk" if api == "chat" else "text_completion"
    base = {"id": "fake-1", "object": obj, "created": created, "model": body.get("model")}
    raw = text.encode()
    step = 3
    for start in range(0, max(len(ids), 1), step):
        part_ids = ids[start : start + step]
        part = raw[start : start + step].decode("utf-8", "ignore")
        choice: dict[str, Any] = {"index": 0, "finish_reason": None}
        if api == "chat":
            delta: dict[str, Any] = {}
            if start == 0:
                delta["role"] = "assistant"
            if tool_call is None:
                delta["content"] = part
            elif start == 0:
                delta["tool_calls"] = [{"index": 0, **tool_call}]
            choice["delta"] = delta
            if want_lp:
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": "?",
                            "logprob": _logprob(start + i),
                            "bytes": [],
                            "top_logprobs": [],
                        }
                        for i in range(len(part_ids))
                    ]
                }
        else:
            choice["text"] = part
            if want_lp:
                choice["logprobs"] = {
                    "tokens": ["?"] * len(part_ids),
                    "token_logprobs": [_logprob(start + i) for i in range(len(part_ids))],
                }
        chunk: dict[str, Any] = {**base, "choices": [choice]}
        if want_ids:
            choice["token_ids"] = part_ids
            if start == 0:
                if api == "chat":
                    chunk["prompt_token_ids"] = prompt_ids
                else:
                    choice["prompt_token_ids"] = prompt_ids
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        await asyncio.sleep(0)
    last: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if api == "chat":
        last["delta"] = {}
    else:
        last["text"] = ""
    yield f"data: {json.dumps({**base, 'choices': [last]})}\n\n".encode()
    if (body.get("stream_options") or {}).get("include_usage"):
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode()
    yield b"data: [DONE]\n\n"


class RunningUpstream(ThreadedServer):
    """The fake upstream in a thread; ``.url`` is its base URL, ``.state`` its requests."""

    def __init__(self, port: int | None, state: FakeUpstream) -> None:
        self.state = state
        super().__init__(create_fake_app(state), port)


def start_fake_upstream(
    port: int | None = None, state: FakeUpstream | None = None
) -> RunningUpstream:
    """Serve the fake upstream on ``port`` (a free one if None); ``.url`` is its base URL."""
    return RunningUpstream(port, state or FakeUpstream())


def main() -> None:
    """``python -m tests.fakes.upstream --port N``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    uvicorn.run(create_fake_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
