"""Relay one streamed call: upstream chunks to the client's API events as they arrive, the
step captured from the same chunks (token IDs and logprobs, time to first token), a broken
stream ended by an error event in the client's shape and recorded as a failed step."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from rllm.producers.gateway.adapters.chat import ChatStream
from rllm.producers.gateway.adapters.stream import StreamEncoder
from rllm.producers.gateway.upstreams import UpstreamFailure
from rllm.schemas.types import StepError

if TYPE_CHECKING:
    from rllm.producers.gateway.call import Call

__all__ = ["each", "relay", "sse_json"]

log = logging.getLogger("rllm.gateway")


async def sse_json(resp: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON payloads of an upstream's server-sent events, until ``[DONE]``.

    Raises:
        UpstreamFailure: a payload is not a JSON object, or is an error (``{"error": ...}``,
            vLLM's ``{"object": "error"}``) that the upstream sent mid-stream.
    """
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise UpstreamFailure(
                "invalid_response",
                502,
                payload.encode()[:2000],
                f"the upstream sent a stream chunk that is not JSON: {payload[:200]!r}",
            ) from exc
        if not isinstance(data, dict):
            raise UpstreamFailure(
                "invalid_response",
                502,
                payload.encode()[:2000],
                f"the upstream sent a stream chunk that is not an object: {payload[:200]!r}",
            )
        if data.get("error") or data.get("object") == "error":
            error = data.get("error") if isinstance(data.get("error"), dict) else data
            message = error.get("message") if isinstance(error, dict) else error
            raise UpstreamFailure(
                "upstream_status",
                502,
                payload.encode()[:2000],
                f"the upstream sent an error mid-stream: {str(message)[:500]}",
            )
        yield data


async def each(chunks: Iterable[dict[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
    """Chunks already at hand (a whole answer cut into chunks) as a stream."""
    for chunk in chunks:
        yield chunk


def _failure(exc: Exception, upstream: str) -> tuple[int, str, str]:
    """``(status, kind, message)`` of what broke a stream."""
    if isinstance(exc, UpstreamFailure):
        return exc.status, exc.error.kind, exc.error.message
    if isinstance(exc, httpx.TimeoutException):
        return 504, "upstream_timeout", f"upstream {upstream} timed out mid-stream"
    if isinstance(exc, httpx.HTTPError):
        return (
            502,
            "upstream_unreachable",
            f"the stream from upstream {upstream} broke: {type(exc).__name__}: {exc}",
        )
    log.exception("a streamed call failed in the gateway")
    return 500, "gateway", f"the gateway failed mid-stream: {type(exc).__name__}: {exc}"


async def relay(
    call: Call,
    chunks: AsyncGenerator[dict[str, Any], None],
    capture: ChatStream,
    encoder: StreamEncoder,
    resp: httpx.Response | None = None,
) -> AsyncIterator[bytes]:
    """Send ``call``'s stream to its client while capturing it.

    Every upstream chunk is read by ``capture`` (token IDs, logprobs; stripped of what the
    client did not ask for) and sent at once as ``encoder``'s events. After the last one the
    step is recorded (with ack capture, acknowledged) before the closing events. A stream
    that breaks ends with ``encoder``'s error event and a failed step; a client that goes
    away cancels the upstream request (``resp`` is closed) and its step is recorded as
    ``client_disconnected``.

    Args:
        call: the call being served.
        chunks: the upstream's OpenAI chunks (vLLM-shaped: token IDs, logprobs).
        capture: the call's accumulator.
        encoder: the client API's stream encoder.
        resp: the open upstream response (None when the answer came whole).
    """
    call.session.in_flight += 1  # the session is not idle while its stream runs
    try:
        async for chunk in chunks:
            if call.cap.ttft_ms is None:
                call.cap.ttft_ms = (time.perf_counter() - call.t_up) * 1000
            events = encoder.feed(capture.feed(chunk))
            if events:
                yield b"".join(events)
        if capture.finish_reason is None:
            raise UpstreamFailure(
                "invalid_response",
                502,
                b"",
                "the upstream's stream ended before its answer finished (no finish_reason)",
            )
        if resp is not None:
            call.received(resp.headers)
        parsed = capture.parsed()
        closing, answer = encoder.finish(parsed)
        call.take(parsed, answer)
        await call.record()
        yield b"".join(closing)
    except Exception as exc:  # every failure ends the stream with an error event
        status, kind, message = _failure(exc, call.upstream.url)
        if resp is not None:
            call.received()
        call.cap.error = StepError(kind=kind, message=message[:2000])
        await call.record()
        yield b"".join(encoder.fail(status, kind, message))
    finally:
        call.session.in_flight -= 1
        call.session.last_seen = time.monotonic()
        if not call.recorded:  # the client went away mid-stream (no await before this)
            call.cap.error = StepError(
                kind="client_disconnected",
                message="the client disconnected mid-stream; the upstream request was cancelled",
            )
            await call.record(wait=False)
            call.state.metrics.inc("rllm_gateway_cancelled_total", api=call.api.value)
        with anyio.CancelScope(shield=True):
            await chunks.aclose()
            if resp is not None:
                await resp.aclose()
