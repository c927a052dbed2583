"""SGLang's native /generate upstream: chat template through a (tiny, locally built)
tokenizer, sampled IDs and logprobs from the upstream."""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest

from rllm.schemas.types import StepCaptured, TokenStatus
from tests.fakes.upstream import RunningUpstream, ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN_KEY, Events


def test_chat_through_generate(
    start_sglang_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    upstream: RunningUpstream,
) -> None:
    gw = start_sglang_gateway()
    client = openai.OpenAI(base_url=f"{gw.url}/sessions/sg/v1", api_key=ADMIN_KEY)
    msgs = [{"role": "user", "content": "hello world"}]
    reply = client.chat.completions.create(model="m", messages=msgs, max_tokens=8)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    assert reply.choices[0].message.content == "ok done"
    assert reply.choices[0].finish_reason == "stop"
    sent = upstream.state.requests[-1]
    # <|im_start|> user hello world <|im_end|> <|im_start|> assistant
    assert sent["input_ids"] == [2, 4, 7, 8, 3, 2, 5]
    assert sent["sampling_params"] == {"max_new_tokens": 8} and sent["return_logprob"] is True
    stream = client.chat.completions.create(model="m", messages=msgs, stream=True, max_tokens=2)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    client.close()
    assert text == "ok done"[:6]
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert len(steps) == 2 and all(s.token_status is TokenStatus.OK for s in steps)
    assert steps[0].prompt_ids.tolist() == [2, 4, 7, 8, 3, 2, 5]
    assert steps[0].response_ids.tolist() == [6, 7, 2]
    assert steps[0].logprobs.tolist() == pytest.approx([-0.05, -0.1, -0.15])
    assert steps[1].finish_reason == "length" and steps[1].response_ids.tolist() == [6, 7]
    assert steps[1].prompt_prefix_len == 7 and steps[1].parent_step_id == steps[0].step_id
