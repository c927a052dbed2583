"""The real ``openai`` package as the agent, through the gateway, events read from Kafka."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import numpy as np
import openai

from rllm.schemas.types import (
    ApiKind,
    SessionClosed,
    SessionEvent,
    SessionOpened,
    StepCaptured,
    TokenStatus,
)
from tests.fakes.upstream import ThreadedServer, answer_text, chat_prompt_text, tokenize
from tests.integration.producers.gateway.fixtures import ADMIN, ADMIN_KEY, Events


def _steps(events: list[tuple[str, SessionEvent]], sid: str) -> list[StepCaptured]:
    return [e.payload for k, e in events if k == sid and isinstance(e.payload, StepCaptured)]


def test_multi_turn_chat_sync_is_captured_with_prefix_delta(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    opened = httpx.post(
        f"{gw.url}/sessions",
        json={
            "session_id": "run-1/task:7/0",
            "run_id": "run-1",
            "task": {"task_id": "task:7"},
            "group_size": 2,
            "agent": "pytest",
        },
        headers=ADMIN,
    ).json()
    assert opened["base_url"] == f"{gw.url}/sessions/run-1/task:7/0/v1"
    client = openai.OpenAI(base_url=opened["base_url"], api_key=opened["api_key"])
    messages: list[dict[str, str]] = [{"role": "user", "content": "What is 7*8?"}]
    prompts = []
    for turn in range(3):
        reply = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
        text = reply.choices[0].message.content or ""
        prompt = chat_prompt_text(messages)
        assert text == answer_text(prompt, None)
        assert reply.choices[0].logprobs is None  # not asked for: stripped
        assert "token_ids" not in (reply.choices[0].model_extra or {})
        prompts.append(prompt)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"and {turn}?"},
        ]
    client.close()
    closed = httpx.post(
        f"{gw.url}/sessions/run-1/task:7/0/close",
        json={"status": "ok", "output": "56"},
        headers={"authorization": f"Bearer {opened['api_key']}"},
    ).json()
    assert closed["num_steps"] == 3

    events = session_events()
    assert {k for k, _ in events} == {"run-1/task:7/0"}
    kinds = [type(e.payload).__name__ for _, e in events]
    assert kinds == ["SessionOpened", *["StepCaptured"] * 3, "SessionClosed"]
    assert isinstance(events[0][1].payload, SessionOpened)
    assert events[0][1].payload.group_size == 2 and events[0][1].run_id == "run-1"
    steps = _steps(events, "run-1/task:7/0")
    assert [s.step_index for s in steps] == [0, 1, 2]
    full_prev: list[int] = []
    for i, (step, prompt) in enumerate(zip(steps, prompts, strict=True)):
        assert step.api is ApiKind.CHAT and step.token_status is TokenStatus.OK
        full = tokenize(prompt)
        answer = tokenize(answer_text(prompt, None))
        if i == 0:
            assert step.prompt_prefix_len == 0 and step.parent_step_id is None
        else:
            assert step.parent_step_id == steps[i - 1].step_id
            assert step.prompt_prefix_len > 0
            assert full[: step.prompt_prefix_len] == full_prev[: step.prompt_prefix_len]
        restored = full_prev[: step.prompt_prefix_len] + step.prompt_ids.tolist()
        assert restored == full
        assert step.response_ids.tolist() == answer
        np.testing.assert_allclose(
            step.logprobs, [-0.05 * (j % 7 + 1) for j in range(len(answer))], rtol=1e-5
        )
        assert step.usage.prompt_tokens == len(full)
        full_prev = full + answer
    # the second prompt extends the first prompt + answer completely
    assert steps[1].prompt_prefix_len == len(tokenize(prompts[0])) + steps[0].response_ids.size
    last = events[-1][1].payload
    assert isinstance(last, SessionClosed) and last.num_steps == 3 and last.output_json == '"56"'


async def test_async_and_streaming_clients(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(capture="async")
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/sessions/s-async/v1", api_key=ADMIN_KEY)
    messages = [{"role": "user", "content": "hello there"}]
    reply = await client.chat.completions.create(
        model="m",
        messages=messages,  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
        logprobs=True,
    )
    assert reply.choices[0].logprobs is not None  # asked for: kept
    stream = await client.chat.completions.create(
        model="m",
        messages=messages,  # type: ignore[arg-type]  # plain dicts, not the SDK's message TypedDicts
        stream=True,
    )
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    expected = answer_text(chat_prompt_text(messages), None)
    assert "".join(parts) == expected
    comp = await client.completions.create(model="m", prompt="2+2=", max_tokens=4)
    assert comp.choices[0].text == answer_text("2+2=", 4)
    cstream = await client.completions.create(model="m", prompt="2+2=", max_tokens=5, stream=True)
    ctext = "".join([c.choices[0].text async for c in cstream])
    assert ctext == answer_text("2+2=", 5)
    await client.close()
    httpx.post(f"{gw.url}/sessions/s-async/close", json={"status": "ok"}, headers=ADMIN)
    steps = _steps(session_events(), "s-async")
    assert [s.api for s in steps] == [
        ApiKind.CHAT,
        ApiKind.CHAT,
        ApiKind.COMPLETIONS,
        ApiKind.COMPLETIONS,
    ]
    assert steps[1].ttft_ms is not None
    assert steps[1].response_ids.tolist() == tokenize(expected)
    assert steps[1].logprobs.size == len(tokenize(expected))
    assert steps[2].prompt_prefix_len == 0 or steps[2].parent_step_id is not None
    restored3 = steps[3].prompt_ids.tolist()
    assert steps[3].response_ids.tolist() == tokenize(answer_text("2+2=", 5))
    assert steps[3].finish_reason == "length"
    assert restored3 == tokenize("2+2=")[steps[3].prompt_prefix_len :]


def test_plain_v1_with_session_key_and_upstream_errors(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(admin_key="admin-secret")
    admin = {"authorization": "Bearer admin-secret"}
    opened = httpx.post(
        f"{gw.url}/sessions", json={"session_id": "keyed", "run_id": "r"}, headers=admin
    ).json()
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=opened["api_key"], max_retries=0)
    assert (
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        .choices[0]
        .message.content
    )
    try:
        client.chat.completions.create(
            model="error-500", messages=[{"role": "user", "content": "a"}]
        )
        raise AssertionError("expected a 500")
    except openai.InternalServerError as exc:
        assert exc.status_code == 500 and "fake upstream failure" in str(exc)
    slow = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=opened["api_key"], max_retries=0)
    wrong = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="nope", max_retries=0)
    try:
        wrong.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        raise AssertionError("expected a 401")
    except openai.AuthenticationError as exc:
        assert exc.status_code == 401
    models = slow.models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    for used in (client, slow, wrong):
        used.close()
    httpx.post(
        f"{gw.url}/sessions/keyed/close",
        json={"status": "error", "error": "boom"},
        headers={"authorization": f"Bearer {opened['api_key']}"},
    )
    events = session_events()
    steps = _steps(events, "keyed")
    assert len(steps) == 2
    assert steps[0].error is None and steps[1].error is not None
    assert steps[1].error.kind == "upstream_status" and steps[1].error.status_code == 500
    assert steps[1].token_status is TokenStatus.MISSING
    closed = events[-1][1].payload
    assert isinstance(closed, SessionClosed) and closed.num_steps == 2 and closed.error == "boom"
