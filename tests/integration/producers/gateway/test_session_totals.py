"""A session's token totals (issue 22 item 2): the gateway sums every step's usage and
answers the close with it, so a rollout whose agent reports no usage still counts tokens."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import rllm
from rllm.producers.sdk import GatewayClient, RolloutConfig
from rllm.schemas.types import SessionStatus, StepCaptured, Task
from tests.fakes.upstream import ThreadedServer, answer_text, chat_prompt_text, tokenize
from tests.integration.producers.gateway.fixtures import ADMIN, Events


def _chat(text: str, max_tokens: int = 4) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def test_the_close_answers_the_sums_of_every_steps_usage(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    info = httpx.post(f"{gw.url}/sessions", json={"session_id": "tot"}, headers=ADMIN).json()
    key = {"authorization": f"Bearer {info['api_key']}"}
    base = info["base_url"]
    for body in (_chat("hello", 4), _chat("longer", 6), _chat("2", 3)):
        r = httpx.post(f"{base}/chat/completions", json=body, headers=key)
        assert r.status_code == 200, r.text
    refused = httpx.post(f"{base}/chat/completions", json={**_chat("x"), "model": "error-500"})
    assert refused.status_code == 401, "no key: refused before any step"
    failed = httpx.post(
        f"{base}/chat/completions", json={**_chat("x"), "model": "error-500"}, headers=key
    )
    assert failed.status_code == 500
    closed = httpx.post(f"{gw.url}/sessions/tot/close", json={}, headers=key)
    assert closed.status_code == 200, closed.text
    answer = closed.json()

    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert len(steps) == answer["num_steps"] == 4  # the 500 is a failed step, without usage
    texts = [chat_prompt_text([{"role": "user", "content": t}]) for t in ("hello", "longer", "2")]
    prompts = [len(tokenize(t)) for t in texts]
    answers = [len(tokenize(answer_text(t, cap))) for t, cap in zip(texts, (4, 6, 3), strict=True)]
    assert [s.usage.prompt_tokens for s in steps] == [*prompts, 0]
    assert answer["prompt_tokens"] == sum(prompts) == sum(s.usage.prompt_tokens for s in steps)
    assert answer["completion_tokens"] == sum(answers) > 0
    assert answer["completion_tokens"] == sum(s.usage.completion_tokens for s in steps)


@rllm.rollout(name="silent")
def silent(task: Task, config: RolloutConfig) -> str:
    """Reports no usage: returns the answer text alone."""
    client = config.openai_client()
    for turn in range(2):
        reply = client.chat.completions.create(
            model=config.model,
            messages=[{"role": "user", "content": f"{task.instruction} {turn}"}],
            max_tokens=5,
        )
    client.close()
    return str(reply.choices[0].message.content)


async def test_a_rollout_whose_agent_reports_no_usage_gets_the_gateways_totals(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway()
    client = GatewayClient(gw.url)
    try:
        outcome = await silent.run(
            Task(task_id="t", instruction="count"), client, run_id="r", model="m"
        )
    finally:
        await client.aclose()
    assert outcome.status is SessionStatus.OK and outcome.num_steps == 2
    steps = [e.payload for _, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert outcome.prompt_tokens == sum(s.usage.prompt_tokens for s in steps) > 0
    assert outcome.completion_tokens == sum(s.usage.completion_tokens for s in steps) > 0
