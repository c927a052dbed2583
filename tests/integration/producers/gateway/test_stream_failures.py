"""Streams that break or are left (issue 17): an upstream failure mid-stream ends the
client's stream with an error event in its own API's shape and a failed step, never a hang;
a client that leaves mid-stream cancels the upstream request; a model server that does not
stream (the local one) still serves streamed calls, its whole answer sent as a stream."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import httpx
import openai
import pytest

from rllm.schemas.types import TokenStatus
from rllm.serving.app import create_app as serving_app
from rllm.serving.engine import Completion
from rllm.serving.sampling import SamplingParams
from tests.fakes.engine import EngineDouble
from tests.fakes.upstream import FakeUpstream, RunningUpstream, ThreadedServer, start_fake_upstream
from tests.integration.producers.gateway.clients import (
    APIS,
    Streamed,
    anthropic_client,
    call,
    openai_client,
)
from tests.integration.producers.gateway.fixtures import Events, session_steps


def _wait(what: str, check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize("model", ["error-midstream", "drop-midstream"])
@pytest.mark.parametrize("api", APIS)
def test_a_stream_that_breaks_ends_with_an_error_event_and_a_failed_step(
    api: str,
    model: str,
    start_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    dripping: RunningUpstream,
) -> None:
    gw = start_gateway(upstream_url=dripping.url)
    kind = "upstream_status" if model == "error-midstream" else "upstream_unreachable"
    sid = f"{model}/{api}"
    t0 = time.monotonic()
    if api in ("chat", "completions"):
        with pytest.raises(openai.APIError) as raised:
            call(gw.url, sid, api, stream=True, model=model)
        assert isinstance(raised.value.body, dict) and raised.value.body["type"] == kind
        message = raised.value.message
    elif api == "anthropic":
        with pytest.raises(anthropic.APIStatusError) as failed:
            call(gw.url, sid, api, stream=True, model=model)
        body: Any = failed.value.body
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        message = body["error"]["message"]
        assert message.startswith(f"{kind}: ")
    else:
        got = call(gw.url, sid, api, stream=True, model=model)
        assert isinstance(got, Streamed)
        assert got.text == "ok"  # the two chunks before the failure reached the client
        assert got.kinds[:2] == ["response.created", "response.in_progress"]
        assert got.kinds[-1] == "response.failed"
        response = got.events[-1].response
        assert response.status == "failed" and response.error.code == "server_error"
        message = response.error.message
        assert message.startswith(f"{kind}: ")
    assert time.monotonic() - t0 < 15, "the broken stream hung"
    if model == "error-midstream":
        assert "fake failure mid-stream" in message
    else:
        assert "broke" in message
    (step,) = session_steps(session_events, sid)
    assert step.error is not None and step.error.kind == kind
    assert step.token_status is TokenStatus.MISSING and step.ttft_ms is not None
    metrics = httpx.get(f"{gw.url}/metrics").text
    assert f'rllm_gateway_errors_total{{kind="{kind}"}} 1' in metrics


def _leave_after_first_token(gw: str, sid: str, api: str) -> str:
    """Stream ``api`` and close the stream at its first text delta; return that text."""
    if api == "anthropic":
        with anthropic_client(gw, sid) as claude:
            stream: Any = claude.messages.create(
                model="m",
                max_tokens=64,
                messages=[{"role": "user", "content": "hello world"}],
                stream=True,
            )
            for event in stream:
                if event.type == "content_block_delta":
                    stream.close()
                    return str(event.delta.text)
    with openai_client(gw, sid) as client:
        if api == "responses":
            stream = client.responses.create(model="m", input="hello world", stream=True)
            for event in stream:
                if event.type == "response.output_text.delta":
                    stream.close()
                    return str(event.delta)
        messages: Any = [{"role": "user", "content": "hello world"}]
        stream = client.chat.completions.create(model="m", messages=messages, stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                stream.close()
                return str(chunk.choices[0].delta.content)
    raise AssertionError("the stream had no text")


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_client_that_leaves_mid_stream_cancels_the_upstream_request(
    api: str, start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    state = FakeUpstream(chunk_delay_s=0.5, tokens_per_chunk=1)
    up = start_fake_upstream(state=state)
    try:
        gw = start_gateway(upstream_url=up.url)
        assert _leave_after_first_token(gw.url, f"left-{api}", api) == "o"
        _wait("the upstream kept streaming to a client that left", lambda: state.cancelled == 1)
        assert state.stream_ends == []  # it never sent its last token
    finally:
        up.stop()
    _wait(
        "the abandoned call was never recorded",
        lambda: bool(session_steps(session_events, f"left-{api}")),
    )
    (step,) = session_steps(session_events, f"left-{api}")
    assert step.error is not None and step.error.kind == "client_disconnected"
    metrics = httpx.get(f"{gw.url}/metrics").text
    assert re.search(rf'rllm_gateway_cancelled_total{{api="{step.api.value}"}} 1\b', metrics)


class _Tokenizer:
    """The local model server's tokenizer, for a model double: a message is one token."""

    def apply_chat_template(self, messages: list[Any], **_: Any) -> list[int]:
        return [1, *range(10, 10 + len(messages)), 2]

    def encode(self, text: str, **_: Any) -> list[int]:
        return [ord(c) % 100 for c in text]

    def decode(self, ids: list[int], **_: Any) -> str:
        return "".join(chr(ord("a") + i % 26) for i in ids)


class _Model(EngineDouble):
    """A test double of the local model server's engine: three tokens per prompt."""

    tokenizer = _Tokenizer()

    def generate(
        self, prompts: list[list[int]], params: list[SamplingParams], stop: Sequence[Any] = ()
    ) -> list[Completion]:
        return [
            Completion(
                token_ids=[5, 6, 7],
                logprobs=[-0.1, -0.2, -0.3],
                top_logprobs=[[], [], []],
                text="fgh",
                finish_reason="stop",
            )
            for _ in prompts
        ]


@pytest.mark.parametrize("api", APIS)
def test_a_model_server_that_answers_whole_still_serves_streamed_calls(
    api: str, start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    local = ThreadedServer(serving_app(_Model(), "m", batch_wait_ms=1), lifespan="on")  # type: ignore[arg-type]  # a stand-in engine with only what serving_app calls
    try:
        gw = start_gateway(upstream_url=local.url, upstream_streams=False)
        whole = call(gw.url, f"whole-{api}", api, stream=False, content="hi")
        streamed = call(gw.url, f"stream-{api}", api, stream=True, content="hi")
    finally:
        local.stop()
    assert isinstance(streamed, Streamed) and streamed.text == "fgh"
    if api == "responses":
        assert streamed.kinds[-1] == "response.completed" and whole.output_text == "fgh"
    if api == "anthropic":
        assert streamed.kinds[-1] == "message_stop" and whole.content[0].text == "fgh"
    (w,) = session_steps(session_events, f"whole-{api}")
    (s,) = session_steps(session_events, f"stream-{api}")
    assert s.token_status is TokenStatus.OK and s.error is None
    assert s.response_ids.tolist() == w.response_ids.tolist() == [5, 6, 7]
    assert s.prompt_ids.tolist() == w.prompt_ids.tolist()
    assert s.logprobs.tolist() == pytest.approx(w.logprobs.tolist())
    assert (s.finish_reason, s.usage) == (w.finish_reason, w.usage)
