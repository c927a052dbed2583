"""A deterministic OpenAI-compatible model server, vLLM-flavoured, for tests and perf scripts.

It is a test double of the model server only. Tokens are bytes: a text's token IDs are its
UTF-8 bytes plus 3, so a chat prompt that extends an earlier prompt and its answer extends
its token IDs too (as a real chat template does). It honours vLLM's ``return_token_ids``
(top-level ``prompt_token_ids``, per-choice ``token_ids``) and ``logprobs``, for chat and
completions, streaming or not.

``POST /generate`` is SGLang's native endpoint: it answers the last input ID + 1 and + 2,
then 2 (end), with logprobs when ``return_logprob`` is set; sample ``j`` of ``n > 1`` answers
each ID + ``j`` (a list of answers). Streamed, it sends one output per token, each with the
whole output so far (SGLang's default) or only the new token (``generate_incremental``, as
SGLang's ``--incremental-streaming-output``), samples interleaved with their ``index``.

Streams send ``tokens_per_chunk`` tokens a chunk (chat, completions), wait ``chunk_delay_s``
between chunks, and note when each sent its last token (``stream_ends``) or lost its client
first (``cancelled``).

With ``max_model_len`` set, ``/v1/models`` reports it, ``POST /tokenize`` counts a chat's
(``messages``) or a completion's (``prompt``) tokens as vLLM does, and a request whose
prompt and ``max_tokens`` are over it is refused with vLLM's 400.

Special models: ``error-500`` answers 500, ``error-400`` answers 400, ``slow-N`` sleeps N
seconds first; streamed, ``error-midstream`` sends two chunks then an error chunk and
``drop-midstream`` two chunks then drops the connection. A request with ``tools`` whose last
message is from the user gets a tool call.

Use ``start_fake_upstream(port) -> base URL`` (uvicorn in a thread), or
``python -m tests.fakes.upstream --port N [--chunk-delay-ms D] [--tokens-per-chunk K]``.
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
    """The fake server's state: every request body it received, in order, and its streams."""

    def __init__(
        self,
        chunk_delay_s: float = 0.0,
        tokens_per_chunk: int = 3,
        generate_incremental: bool = False,
        max_model_len: int | None = None,
        extra_models: tuple[str, ...] = (),
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.extra_models = extra_models
        """Model ids ``/v1/models`` lists after fake-model (answered like it)."""
        self.max_model_len = max_model_len
        """The context it reports and enforces (None: it says nothing, enforces nothing)."""
        self.tokenized = 0
        """``POST /tokenize`` requests answered."""
        self.served_version: int | None = None
        """When set, answers carry the local model server's policy header with it."""
        self.chunk_delay_s = chunk_delay_s
        """Seconds a stream waits between two chunks."""
        self.tokens_per_chunk = tokens_per_chunk
        """Tokens in each chunk of a chat or completions stream."""
        self.generate_incremental = generate_incremental
        """A streamed ``/generate`` sends only each output's new token."""
        self.stream_ends: list[float] = []
        """``time.monotonic()`` when each stream sent its last token, in order."""
        self.cancelled = 0
        """Streams whose client went away before their end."""

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
        model: dict[str, Any] = {"id": "fake-model", "object": "model"}
        if state.max_model_len is not None:
            model["max_model_len"] = state.max_model_len
        extra = [{"id": m, "object": "model"} for m in state.extra_models]
        return JSONResponse({"object": "list", "data": [model, *extra]})

    async def tokenize_route(request: Request) -> Response:
        body = await request.json()
        if state.max_model_len is None:
            return _error(404, "no /tokenize")
        text = chat_prompt_text(body["messages"]) if "messages" in body else str(body["prompt"])
        state.tokenized += 1
        ids = tokenize(text)
        return JSONResponse(
            {"count": len(ids), "max_model_len": state.max_model_len, "tokens": ids}
        )

    def over_context(body: dict[str, Any], prompt: str) -> Response | None:
        """vLLM's refusal of a prompt and ``max_tokens`` over its context."""
        limit, asked = state.max_model_len, body.get("max_tokens") or 0
        if limit is None or len(tokenize(prompt)) + asked <= limit:
            return None
        return _error(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{len(tokenize(prompt)) + asked} tokens ({len(tokenize(prompt))} in the messages, "
            f"{asked} in the completion).",
        )

    async def chat(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        model = str(body.get("model", ""))
        special = await _special(model)
        if special is not None:
            return special
        messages = body.get("messages") or []
        prompt = chat_prompt_text(messages)
        refused = over_context(body, prompt)
        if refused is not None:
            return refused
        tools = body.get("tools") or []
        tool_call = None
        last_role = messages[-1].get("role") if messages else None
        if tools and body.get("tool_choice") != "none" and last_role == "user":
            tool_call = _tool_call(tools)
            text = json.dumps(tool_call["function"], sort_keys=True)
        else:
            text = answer_text(prompt, body.get("max_tokens") or body.get("max_completion_tokens"))
        return state.stamp(_respond(body, "chat", prompt, text, tool_call, state))

    async def completions(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        special = await _special(str(body.get("model", "")))
        if special is not None:
            return special
        prompt = body.get("prompt", "")
        prompt = prompt[0] if isinstance(prompt, list) else prompt
        text = answer_text(str(prompt), body.get("max_tokens", 16))
        return state.stamp(_respond(body, "completions", str(prompt), text, None, state))

    async def generate(request: Request) -> Response:
        """SGLang's native endpoint: token IDs in, token IDs and logprobs out."""
        body = await request.json()
        state.requests.append(body)
        ids_in = [int(i) for i in body["input_ids"]]
        params = body.get("sampling_params") or {}
        cap = params.get("max_new_tokens")
        n = int(params.get("n") or 1)
        samples = [
            [ids_in[-1] + 1 + j, ids_in[-1] + 2 + j, 2][: cap if cap is not None else 3]
            for j in range(n)
        ]
        logprob = bool(body.get("return_logprob"))
        if body.get("stream"):
            return StreamingResponse(
                _generate_stream(state, len(ids_in), samples, logprob),
                media_type="text/event-stream",
            )
        outs = [
            _generate_out(len(ids_in), out_ids, j, len(out_ids), logprob, False)
            for j, out_ids in enumerate(samples)
        ]
        return JSONResponse(outs if n > 1 else outs[0])

    return Starlette(
        routes=[
            Route("/generate", generate, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/tokenize", tokenize_route, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )


def _respond(
    body: dict[str, Any],
    api: str,
    prompt: str,
    text: str,
    tool_call: dict[str, Any] | None,
    state: FakeUpstream | None = None,
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
                state or FakeUpstream(),
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
    state: FakeUpstream,
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
    step = state.tokens_per_chunk
    parts: list[bytes] = []
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
        parts.append(_data(chunk))
    last: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if api == "chat":
        last["delta"] = {}
    else:
        last["text"] = ""
    tail = [_data({**base, "choices": [last]})]
    if (body.get("stream_options") or {}).get("include_usage"):
        tail.append(_data({**base, "choices": [], "usage": usage}))
    async for event in _paced(state, str(body.get("model", "")), parts, tail):
        yield event


def _data(payload: Any) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def _paced(
    state: FakeUpstream, model: str, parts: list[bytes], tail: list[bytes]
) -> AsyncIterator[bytes]:
    """Send ``parts`` (the token chunks) ``chunk_delay_s`` apart, then ``tail`` and [DONE];
    note the end, or the client that left first."""
    try:
        for k, part in enumerate(parts):
            if k:
                await asyncio.sleep(state.chunk_delay_s)
            if k == 2 and model == "error-midstream":
                yield _data({"error": {"message": "fake failure mid-stream", "code": 500}})
                return
            if k == 2 and model == "drop-midstream":
                raise RuntimeError("the fake upstream drops the connection mid-stream")
            yield part
        state.stream_ends.append(time.monotonic())
        for event in tail:
            yield event
        yield b"data: [DONE]\n\n"
    except (asyncio.CancelledError, GeneratorExit):
        state.cancelled += 1
        raise


def _generate_out(
    prompt_tokens: int, sample: list[int], j: int, k: int, logprob: bool, new_only: bool
) -> dict[str, Any]:
    """Sample ``j``'s ``/generate`` output after its first ``k`` tokens: all of it so far,
    or (``new_only``) its ``k``-th token."""
    whole = "ok done"[: 3 * len(sample)]
    text = whole if k == len(sample) else whole[: 3 * k]
    lps = [[_logprob(i + j), t, None] for i, t in enumerate(sample[:k])]
    ids = sample[:k]
    if new_only:
        text, ids, lps = text[len(whole[: 3 * (k - 1)]) :], ids[k - 1 :], lps[k - 1 :]
    finished = k == len(sample)
    return {
        "text": text,
        "output_ids": ids,
        "meta_info": {
            "id": f"fake-{j}",
            "prompt_tokens": prompt_tokens,
            "completion_tokens": k,
            "finish_reason": (
                {"type": "length" if len(sample) < 3 else "stop"} if finished else None
            ),
            "output_token_logprobs": lps if logprob else None,
        },
    }


async def _generate_stream(
    state: FakeUpstream, prompt_tokens: int, samples: list[list[int]], logprob: bool
) -> AsyncIterator[bytes]:
    """A streamed ``/generate``: one output per token, the samples interleaved."""
    parts = []
    for k in range(1, max(len(s) for s in samples) + 1):
        for j, sample in enumerate(samples):
            if k <= len(sample):
                out = _generate_out(
                    prompt_tokens, sample, j, k, logprob, state.generate_incremental
                )
                if len(samples) > 1:
                    out["index"] = j
                parts.append(_data(out))
    async for event in _paced(state, "", parts, []):
        yield event


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
    """``python -m tests.fakes.upstream --port N [--chunk-delay-ms D] [--tokens-per-chunk K]``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--chunk-delay-ms", type=float, default=0.0, help="wait between two stream chunks"
    )
    parser.add_argument("--tokens-per-chunk", type=int, default=3, help="tokens a stream chunk")
    args = parser.parse_args()
    state = FakeUpstream(
        chunk_delay_s=args.chunk_delay_ms / 1000, tokens_per_chunk=args.tokens_per_chunk
    )
    uvicorn.run(create_fake_app(state), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
