"""Serve one LLM call through the gateway: dispatch it upstream by API and upstream kind,
answer the agent, capture the step (``call``; ``streaming`` relays a streamed call chunk by
chunk)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NamedTuple

from starlette.responses import Response, StreamingResponse

from rllm.errors import RllmError
from rllm.producers.gateway.adapters import anthropic, responses
from rllm.producers.gateway.adapters.anthropic_stream import AnthropicStream
from rllm.producers.gateway.adapters.chat import ChatStream, parse_chat, prepare_chat
from rllm.producers.gateway.adapters.completions import (
    CompletionStream,
    parse_completion,
    prepare_completion,
)
from rllm.producers.gateway.adapters.responses_stream import ResponsesStream
from rllm.producers.gateway.adapters.stream import OpenAIStream, StreamEncoder, as_chunks
from rllm.producers.gateway.call import Call
from rllm.producers.gateway.clock import Timing
from rllm.producers.gateway.errors import GatewayError
from rllm.producers.gateway.jsonio import JsonAnswer
from rllm.producers.gateway.replicas import Replica
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.settings import UpstreamKind
from rllm.producers.gateway.sglang import SglangGenerate
from rllm.producers.gateway.sglang_stream import GenerateStream
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.streaming import each, relay, sse_json
from rllm.producers.gateway.types import Parsed
from rllm.producers.gateway.upstreams import UpstreamFailure
from rllm.schemas.types import ApiKind, StepError, Usage

__all__ = ["API_PATHS", "handle_call"]

API_PATHS = {
    "chat/completions": ApiKind.CHAT,
    "completions": ApiKind.COMPLETIONS,
    "responses": ApiKind.RESPONSES,
    "messages": ApiKind.ANTHROPIC_MESSAGES,
}
_TRANSLATED = {ApiKind.RESPONSES: responses, ApiKind.ANTHROPIC_MESSAGES: anthropic}


async def handle_call(
    state: GatewayState,
    session: Session,
    api: ApiKind,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timing: Timing | None = None,
    gone: Callable[[], Awaitable[None]] | None = None,
    query: str = "",
) -> Response:
    """Serve one API call for ``session`` and capture it as a step.

    What the upstream is not sent (a translated API's fields a chat upstream has no place
    for, the URL's query) is recorded in the step and logged once per session; a
    ``max_tokens`` over what the upstream's context leaves is cut to it (``context``).

    A request refused before dispatch (one that cannot be translated) takes no step index,
    so a session's published steps are numbered 0..n-1 without gaps. When ``gone`` returns
    first (the client disconnected before its answer), the upstream request is cancelled
    (its connection closed, so the model server stops generating) and the call is recorded
    as a failed step of kind ``client_disconnected``.
    """
    hosted = state.upstream.kind is UpstreamKind.HOSTED
    replica, note = state.replicas.route(session.session_id)
    sent, chat_body = _for_replica(replica, api, body, hosted)
    call = Call(state, session, api, sent, timing, replica)
    if note is not None:
        call.moved(note)
    if not hosted:
        call.dropped(
            (_TRANSLATED[api].dropped(sent) if chat_body is not None else [])
            + ([f"?{query}"] if query else [])
        )
    session.in_flight += 1
    try:
        work = _serve(call, path, body, headers, hosted, chat_body)
        if gone is None:
            return await work
        answer = await _unless_gone(work, gone)
        if answer is not None:
            return answer
        if not call.recorded:
            if call.t_up:
                call.received()
            call.cap.error = StepError(
                kind="client_disconnected",
                message="the client disconnected before its answer; the upstream request "
                "was cancelled",
            )
            await call.record(wait=False)
        state.metrics.inc("rllm_gateway_cancelled_total", api=api.value)
        return Response(status_code=499)
    finally:
        session.in_flight -= 1
        session.last_seen = time.monotonic()


_WATCH_AFTER_S = 0.05
"""A call unanswered this long is watched for its client leaving; a quicker one is answered
before a watcher task would have started."""


async def _unless_gone(
    work: Coroutine[Any, Any, Response], gone: Callable[[], Awaitable[None]]
) -> Response | None:
    """``work``'s answer, awaited in this task; None when the client left first (``gone``
    returned), which cancels ``work`` where it waits. The watcher task waiting on ``gone``
    starts only once the call has taken ``_WATCH_AFTER_S`` (a client that left before
    then is seen at once: its disconnect is already queued)."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    flags = {"left": False, "over": False}
    watch: asyncio.Task[None] | None = None

    def left(watcher: asyncio.Task[None]) -> None:
        if watcher.cancelled() or flags["over"]:
            return
        watcher.exception()  # retrieved: a watcher that failed counts as the client gone
        flags["left"] = True
        task.cancel()

    def start() -> None:
        nonlocal watch
        if not flags["over"]:
            watch = loop.create_task(_wait(gone))
            watch.add_done_callback(left)

    timer = loop.call_later(_WATCH_AFTER_S, start)
    try:
        return await work
    except asyncio.CancelledError:
        if not flags["left"]:
            raise
        task.uncancel()
        return None
    finally:
        flags["over"] = True
        timer.cancel()
        if watch is not None:
            watch.cancel()


async def _wait(gone: Callable[[], Awaitable[None]]) -> None:
    await gone()


def _for_replica(
    replica: Replica, api: ApiKind, body: dict[str, Any], hosted: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The agent's request as ``replica`` is sent it (naming the LoRA adapter that serves
    its stamped policy, read with it: no await between), and its chat-completions request
    when the API is translated."""
    if replica.served_model is not None and not hosted:
        body = {**body, "model": replica.served_model}
    return body, None if hosted or api not in _TRANSLATED else _to_chat(api, body)


async def _serve(
    call: Call,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    hosted: bool,
    chat_body: dict[str, Any] | None,
) -> Response:
    """Dispatch ``call`` by API and upstream kind (``body``: the agent's request); an
    upstream failure is its answer. A replica that cannot be reached is taken out and the
    call is served by the session's next one (its step notes the move), while one is live.
    """
    replicas = call.state.replicas
    while True:
        replica = call.replica
        replica.in_flight += 1
        try:
            return await _attempt(call, path, headers, hosted, chat_body)
        except UpstreamFailure as failure:
            if failure.error.kind != "upstream_unreachable":
                return await call.failed(failure)
            replicas.take_out(replica, failure.error.message)
            moved, note = replicas.route(call.session.session_id)
            if moved is replica:
                return await call.failed(failure)
            sent, chat_body = _for_replica(moved, call.api, body, hosted)
            call.reroute(moved, sent, note)
        finally:
            replica.in_flight -= 1


async def _attempt(
    call: Call,
    path: str,
    headers: dict[str, str],
    hosted: bool,
    chat_body: dict[str, Any] | None,
) -> Response:
    """Dispatch ``call`` to its replica by API and upstream kind."""
    if hosted:
        return await _passthrough(call, path, headers)
    chat = call.api is not ApiKind.COMPLETIONS
    body = call.body
    sent, tokenized = await _fit(call, chat, chat_body if chat_body is not None else body)
    if body.get("stream"):
        return await _stream(call, chat, sent, headers, tokenized)
    if chat_body is not None:
        return await _translated(call, sent, headers, tokenized)
    return await _native(call, sent, headers, tokenized)


class Tokenized(NamedTuple):
    """An sglang call: the prompt's IDs, which the gateway tokenized itself, and the
    ``/generate`` client that sends them."""

    generate: SglangGenerate
    prompt_ids: list[int]


async def _fit(
    call: Call, chat: bool, body: dict[str, Any]
) -> tuple[dict[str, Any], Tokenized | None]:
    """The upstream request with its ``max_tokens`` fitted to the context, and the prompt's
    IDs when the gateway tokenizes (sglang)."""
    up = call.upstream
    tokenized = None
    if up.sglang is not None:
        tokenized = Tokenized(up.sglang, up.sglang.prompt_ids(body, chat))
    known = len(tokenized.prompt_ids) if tokenized is not None else None
    sent, clamp = await up.context.fit(body, chat, known, len(call.session.last_full_ids))
    if clamp is not None:
        call.clamped(clamp)
    return sent, tokenized


async def _complete(
    call: Call,
    chat: bool,
    body: dict[str, Any],
    headers: dict[str, str],
    tokenized: Tokenized | None = None,
) -> Any:
    """The upstream's chat completion or completion, in the vLLM shape."""
    up = call.upstream
    answer: dict[str, str] = {}
    call.sent()
    if tokenized is not None:
        data = await tokenized.generate.complete(up, body, chat, headers, tokenized.prompt_ids)
    elif chat:
        data = await up.post_json("/v1/chat/completions", prepare_chat(body, True), headers, answer)
    else:
        path, prepared = "/v1/completions", prepare_completion(body, True)
        data = await up.post_json(path, prepared, headers, answer)
    call.received(answer)
    return data


def _parse(chat: bool, body: dict[str, Any], data: Any) -> Parsed:
    """The capture of a whole answer.

    Raises:
        UpstreamFailure: the answer is not a chat completion (or completion).
    """
    try:
        return parse_chat(body, data) if chat else parse_completion(body, data)
    except RllmError as exc:
        raise UpstreamFailure("invalid_response", 502, json.dumps(data).encode(), str(exc)) from exc


async def _native(
    call: Call, sent: dict[str, Any], headers: dict[str, str], tokenized: Tokenized | None
) -> Response:
    chat = call.api is ApiKind.CHAT
    parsed = _parse(chat, call.body, await _complete(call, chat, sent, headers, tokenized))
    call.take(parsed, parsed.client)
    await call.record()
    return JsonAnswer(parsed.client)


async def _translated(
    call: Call, chat_body: dict[str, Any], headers: dict[str, str], tokenized: Tokenized | None
) -> Response:
    data = await _complete(call, True, chat_body, headers, tokenized)
    parsed = _parse(True, chat_body, data)
    answer = _TRANSLATED[call.api].from_chat(call.body, parsed)
    call.take(parsed, answer)
    await call.record()
    return JsonAnswer(answer)


def _encoder(call: Call, capture: ChatStream) -> StreamEncoder:
    """The stream encoder of the call's API."""
    if call.api is ApiKind.RESPONSES:
        return ResponsesStream(call.body)
    if call.api is ApiKind.ANTHROPIC_MESSAGES:
        return AnthropicStream(call.body, capture)
    return OpenAIStream(usage=bool((call.body.get("stream_options") or {}).get("include_usage")))


async def _stream(
    call: Call,
    chat: bool,
    body: dict[str, Any],
    headers: dict[str, str],
    tokenized: Tokenized | None,
) -> Response:
    """Serve a streamed call as the upstream streams it (``body``: the upstream request):
    every chunk is translated to the client's API and sent at once. A model server that
    does not stream (``upstream_streams`` off) answers whole, and its answer is sent as
    one chunk."""
    capture = ChatStream(body) if chat else CompletionStream(body)
    encoder = _encoder(call, capture)
    up = call.upstream
    resp = None
    if not up.streams:
        whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        data = await _complete(call, chat, whole, headers, tokenized)
        chunks = each(as_chunks(data, chat))
    elif tokenized is not None:
        call.sent()
        resp = await tokenized.generate.open_stream(up, body, headers, tokenized.prompt_ids)
        chunks = GenerateStream(body, chat, tokenized.prompt_ids).chunks(sse_json(resp))
    else:
        prepared = prepare_chat(body, True) if chat else prepare_completion(body, True)
        options = {**(body.get("stream_options") or {}), "include_usage": True}
        prepared = {**prepared, "stream": True, "stream_options": options}
        call.sent()
        path = "/v1/chat/completions" if chat else "/v1/completions"
        resp = await up.open_stream(path, prepared, headers)
        chunks = sse_json(resp)
    return StreamingResponse(
        relay(call, chunks, capture, encoder, resp), media_type="text/event-stream"
    )


def _to_chat(api: ApiKind, body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request of a translated API call.

    Raises:
        GatewayError: 400 naming what cannot be translated.
    """
    try:
        chat: dict[str, Any] = _TRANSLATED[api].to_chat(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise GatewayError(400, f"cannot translate the {api.value} request: {reason}") from exc
    return chat


async def _passthrough(call: Call, path: str, headers: dict[str, str]) -> Response:
    content = json.dumps(call.body).encode()
    call.sent()
    resp = await call.upstream.forward("POST", path, content, headers)
    call.received()
    ctype = resp.headers.get("content-type", "application/json")
    if resp.status_code >= 400:
        raise UpstreamFailure(
            "upstream_status",
            resp.status_code,
            resp.content,
            f"upstream answered {resp.status_code}: {resp.text[:500]}",
            ctype,
        )
    try:
        data: Any = resp.json()
    except ValueError:
        data = {"raw": resp.text[:1_000_000]}
    usage = data.get("usage") if isinstance(data, dict) else None
    if isinstance(usage, dict):
        call.cap.usage = Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0),
            completion_tokens=int(
                usage.get("completion_tokens") or usage.get("output_tokens") or 0
            ),
        )
    call.cap.response = data
    await call.record()
    return Response(resp.content, status_code=resp.status_code, media_type=ctype)
