"""One LLM call through the gateway: dispatch upstream, answer the agent, capture the step
(``streaming`` relays a streamed call chunk by chunk)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from rllm.errors import MessageTooLargeError, RllmError
from rllm.schemas.lineage import POLICY_HEADER
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import ApiKind, StepError, Usage, utcnow

from .adapters import anthropic, responses
from .adapters.anthropic_stream import AnthropicStream
from .adapters.base import Parsed
from .adapters.chat import ChatStream, parse_chat, prepare_chat
from .adapters.completions import CompletionStream, parse_completion, prepare_completion
from .adapters.responses_stream import ResponsesStream
from .adapters.stream import OpenAIStream, StreamEncoder, as_chunks
from .capture import (
    Capture,
    choice_capture,
    choices_asked,
    missing_choice,
    sampling_params,
    step_event,
    too_large,
)
from .clock import Timing
from .errors import GatewayError, anthropic_error
from .sessions import Session
from .settings import UpstreamKind
from .sglang_stream import GenerateStream
from .state import GatewayState
from .streaming import each, relay, sse_json
from .upstreams import UpstreamFailure

__all__ = ["API_PATHS", "handle_call"]

API_PATHS = {
    "chat/completions": ApiKind.CHAT,
    "completions": ApiKind.COMPLETIONS,
    "responses": ApiKind.RESPONSES,
    "messages": ApiKind.ANTHROPIC_MESSAGES,
}
_TRANSLATED = {ApiKind.RESPONSES: responses, ApiKind.ANTHROPIC_MESSAGES: anthropic}


class Call:
    """Timing and capture of one call."""

    def __init__(
        self,
        state: GatewayState,
        session: Session,
        api: ApiKind,
        body: dict[str, Any],
        timing: Timing | None = None,
    ) -> None:
        self.state, self.session, self.api, self.body = state, session, api, body
        self.timing = timing or Timing(arrived=time.perf_counter())
        self.timing.call = True
        self.t0 = self.timing.arrived
        self.asked = choices_asked(body)
        self.index = session.take_index(self.asked)
        self.cap = Capture(
            api=api,
            model=str(body.get("model", "")),
            request=body,
            started_at=utcnow(),
            upstream=state.upstream.url,
            policy_version=state.policy_version,
            sampling=sampling_params(body),
        )
        self.t_up = 0.0
        self.recorded = False

    def sent(self) -> None:
        self.t_up = time.perf_counter()

    def received(self, headers: Mapping[str, str] | None = None) -> None:
        """The upstream answered; a local model server names the version that generated
        the answer, which replaces the one stamped at dispatch (a reload may have come
        between the policy update the gateway saw and the server's)."""
        self.cap.latency_ms = (time.perf_counter() - self.t_up) * 1000
        self.timing.upstream_s = self.cap.latency_ms / 1000
        served = (headers or {}).get(POLICY_HEADER)
        if served is not None and served.isdigit():
            self.cap.policy_version = int(served)

    def take(self, parsed: Parsed, response: Any) -> None:
        c = self.cap
        c.response = response
        c.prompt_ids, c.response_ids, c.logprobs = (
            parsed.prompt_ids,
            parsed.response_ids,
            parsed.logprobs,
        )
        c.finish_reason, c.usage = parsed.finish_reason, parsed.usage
        c.more = list(parsed.more)

    async def record(self, wait: bool | None = None) -> None:
        """Publish the step (once); with ack capture this returns after Kafka's ack.

        The step's ``overhead_ms`` is the time from the request's arrival to here, less the
        upstream's: reading, parsing, checking, translating and capturing (the Kafka wait
        and the sending come after the event is built; ``rllm_gateway_added_latency_seconds``
        covers them, to the answer's last byte).

        A step whose event is over the event limit (``RLLM_MAX_MESSAGE_BYTES``) is published
        as a failed step (kind ``too_large``) without its payloads, so the agent still gets
        its answer and the session's published steps stay contiguous and counted.
        """
        if self.recorded:
            return
        self.recorded = True
        total = (time.perf_counter() - self.t0) * 1000
        self.cap.overhead_ms = max(total - self.cap.latency_ms, 0.0)
        m = self.state.metrics
        m.observe("rllm_gateway_upstream_latency_seconds", self.cap.latency_ms / 1000)
        settled = self._submit_choices()
        if self.cap.error is not None:
            m.inc("rllm_gateway_errors_total", kind=self.cap.error.kind)
        if self.state.wait_for_ack if wait is None else wait:
            await asyncio.gather(*(asyncio.wrap_future(f) for f in settled))

    def _submit_choices(self) -> list[Future[None]]:
        """Submit one step per choice, at consecutive step indices from the call's: the
        first choice as the call's step, each other one delta-encoded against it (its
        parent, by key), then the session continues from the first choice. Reserved
        indices the call did not use are given back, or filled with failed steps when a
        later call already took an index after them."""
        s = self.session
        more = self.cap.more[: self.asked - 1] if self.cap.error is None else []
        settled = [self._submit(self.cap, self.index)]
        first = (s.last_step_id, s.last_full_ids)
        for k, sample in enumerate(more, start=1):
            settled.append(self._submit(choice_capture(self.cap, sample), self.index + k))
            s.last_step_id, s.last_full_ids = first
        used = 1 + len(more)
        if not s.give_back(self.index, self.asked, used):
            for k in range(used, self.asked):
                gap = missing_choice(self.cap, k, self.asked)
                settled.append(self._submit(gap, self.index + k))
        return settled

    def _submit(self, cap: Capture, index: int) -> Future[None]:
        """Build and submit one step event (no await between: the session's delta state
        and step count change only for an event that was taken)."""
        s, producer = self.session, self.state.settings.producer_name
        before = (s.last_step_id, s.last_full_ids, s.num_steps)
        event = step_event(s, cap, index, producer)
        try:
            return self.state.sink.submit(SESSION_EVENTS, s.session_id, event)
        except MessageTooLargeError as exc:
            s.last_step_id, s.last_full_ids, s.num_steps = before
            self.state.metrics.inc("rllm_gateway_errors_total", kind="too_large")
            event = step_event(s, too_large(cap, str(exc)), index, producer)
            return self.state.sink.submit(SESSION_EVENTS, s.session_id, event)

    async def failed(self, failure: UpstreamFailure) -> Response:
        self.received()
        self.cap.error = failure.error
        try:
            self.cap.response = json.loads(failure.body)
        except ValueError:
            self.cap.response = {"raw": failure.body[:2000].decode("utf-8", "replace")}
        await self.record()
        translated = self.state.upstream.kind is not UpstreamKind.HOSTED
        if translated and self.api is ApiKind.ANTHROPIC_MESSAGES:  # an Anthropic client reads it
            body = anthropic_error(failure.status, failure.error.message)
            return JSONResponse(body, status_code=failure.status)
        return Response(failure.body, status_code=failure.status, media_type=failure.content_type)


async def handle_call(
    state: GatewayState,
    session: Session,
    api: ApiKind,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timing: Timing | None = None,
    gone: Callable[[], Awaitable[None]] | None = None,
) -> Response:
    """Serve one API call for ``session`` and capture it as a step.

    A request refused before dispatch (one that cannot be translated) takes no step index,
    so a session's published steps are numbered 0..n-1 without gaps. When ``gone`` returns
    first (the client disconnected before its answer), the upstream request is cancelled
    (its connection closed, so the model server stops generating) and the call is recorded
    as a failed step of kind ``client_disconnected``.
    """
    hosted = state.upstream.kind is UpstreamKind.HOSTED
    chat_body = None if hosted or api not in _TRANSLATED else _to_chat(api, body)
    call = Call(state, session, api, body, timing)
    session.in_flight += 1
    try:
        work = asyncio.ensure_future(_serve(call, path, body, headers, hosted, chat_body))
        if gone is None:
            return await work
        watch = asyncio.ensure_future(gone())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
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


async def _serve(
    call: Call,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    hosted: bool,
    chat_body: dict[str, Any] | None,
) -> Response:
    """Dispatch ``call`` by API and upstream kind; an upstream failure is its answer."""
    try:
        if hosted:
            return await _passthrough(call, path, headers)
        if body.get("stream"):
            return await _stream(call, chat_body, headers)
        if chat_body is not None:
            return await _translated(call, chat_body, headers)
        return await _native(call, headers)
    except UpstreamFailure as failure:
        return await call.failed(failure)


async def _complete(call: Call, chat: bool, body: dict[str, Any], headers: dict[str, str]) -> Any:
    """The upstream's chat completion or completion, in the vLLM shape."""
    up = call.state.upstream
    answer: dict[str, str] = {}
    call.sent()
    if up.sglang is not None:
        data = await up.sglang.complete(up, body, chat, headers)
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


async def _native(call: Call, headers: dict[str, str]) -> Response:
    chat = call.api is ApiKind.CHAT
    parsed = _parse(chat, call.body, await _complete(call, chat, call.body, headers))
    call.take(parsed, parsed.client)
    await call.record()
    return JSONResponse(parsed.client)


async def _translated(call: Call, chat_body: dict[str, Any], headers: dict[str, str]) -> Response:
    parsed = _parse(True, chat_body, await _complete(call, True, chat_body, headers))
    answer = _TRANSLATED[call.api].from_chat(call.body, parsed)
    call.take(parsed, answer)
    await call.record()
    return JSONResponse(answer)


def _encoder(call: Call, capture: ChatStream) -> StreamEncoder:
    """The stream encoder of the call's API."""
    if call.api is ApiKind.RESPONSES:
        return ResponsesStream(call.body)
    if call.api is ApiKind.ANTHROPIC_MESSAGES:
        return AnthropicStream(call.body, capture)
    return OpenAIStream(usage=bool((call.body.get("stream_options") or {}).get("include_usage")))


async def _stream(
    call: Call, chat_body: dict[str, Any] | None, headers: dict[str, str]
) -> Response:
    """Serve a streamed call as the upstream streams it: every chunk is translated to the
    client's API and sent at once. A model server that does not stream
    (``upstream_streams`` off) answers whole, and its answer is sent as one chunk."""
    chat = call.api is not ApiKind.COMPLETIONS
    body = chat_body if chat_body is not None else call.body  # what the upstream answers
    capture = ChatStream(body) if chat else CompletionStream(body)
    encoder = _encoder(call, capture)
    up = call.state.upstream
    resp = None
    if not up.streams:
        whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        data = await _complete(call, chat, whole, headers)
        chunks = each(as_chunks(data, chat))
    elif up.sglang is not None:
        call.sent()
        resp, prompt_ids = await up.sglang.open_stream(up, body, chat, headers)
        chunks = GenerateStream(body, chat, prompt_ids).chunks(sse_json(resp))
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
    resp = await call.state.upstream.forward("POST", path, content, headers)
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
