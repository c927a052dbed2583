"""``n > 1`` (issue 17, defect 4): every choice of one call is captured as its own step,
at consecutive step indices, each choice after the first keyed to the first by
``parent_step_id``, so the assembler restores every prompt and the trainer gets every
sample; the session continues from the first choice."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np

from rllm.processors.assemble import order_steps
from rllm.schemas.delta import restore_steps
from rllm.schemas.types import SessionClosed, TokenStatus
from tests.fakes.upstream import ThreadedServer
from tests.integration.producers.gateway.fixtures import ADMIN, Events, session_steps

PROMPT = [1, 2, 3]


def _ids(k: int, turn: int) -> list[int]:
    return [100 * turn + 10 * k + i for i in range(k + 2)]  # choice k: k + 2 tokens


def _lps(ids: list[int]) -> list[float]:
    return [-0.5 - (t % 7) / 10 for t in ids]


def _upstream(request: httpx.Request) -> httpx.Response:
    """A vLLM-shaped upstream that honours ``n`` (chat and completions)."""
    body: dict[str, Any] = json.loads(request.content)
    if body.get("model") == "broken":
        return httpx.Response(500, json={"error": {"message": "boom"}})
    chat = request.url.path.endswith("/chat/completions")
    turn = len(body.get("messages", [])) if chat else 1
    prompt = PROMPT + [9] * (turn - 1)
    n = body.get("n", 1)
    choices: list[dict[str, Any]] = []
    for k in range(n):
        ids = _ids(k, turn)
        choice: dict[str, Any] = {"index": k, "finish_reason": "stop", "token_ids": ids}
        if chat:
            choice["message"] = {"role": "assistant", "content": f"answer {k}"}
            choice["logprobs"] = {
                "content": [
                    {"token": "t", "logprob": lp, "bytes": [], "top_logprobs": []}
                    for lp in _lps(ids)
                ]
            }
        else:
            choice["text"] = f"answer {k}"
            choice["prompt_token_ids"] = prompt
            choice["logprobs"] = {"tokens": ["t"] * len(ids), "token_logprobs": _lps(ids)}
        choices.append(choice)
    out: dict[str, Any] = {
        "id": "x",
        "object": "chat.completion" if chat else "text_completion",
        "model": body["model"],
        "choices": choices,
        "usage": {"prompt_tokens": len(prompt), "completion_tokens": sum(k + 2 for k in range(n))},
    }
    if chat:
        out["prompt_token_ids"] = prompt
    if body.get("stream") and chat:
        return httpx.Response(200, content=_sse(out), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=out)


def _sse(out: dict[str, Any]) -> bytes:
    """``out`` streamed: the choices' chunks interleaved, two tokens a chunk."""
    head = {"id": out["id"], "object": "chat.completion.chunk", "model": out["model"]}
    chunks: list[dict[str, Any]] = []
    for k, choice in enumerate(out["choices"]):
        ids, lps = choice["token_ids"], choice["logprobs"]["content"]
        for at in range(0, len(ids), 2):
            delta = {"content": "ab" if at else choice["message"]["content"]}
            chunks.insert(
                at // 2 * (k + 1) + k,
                {
                    "index": k,
                    "delta": delta,
                    "token_ids": ids[at : at + 2],
                    "logprobs": {"content": lps[at : at + 2]},
                    "finish_reason": None,
                },
            )
        chunks.append({"index": k, "delta": {}, "finish_reason": "stop"})
    lines = [{**head, "choices": [c]} for c in chunks]
    lines[0]["prompt_token_ids"] = out["prompt_token_ids"]
    lines.append({**head, "choices": [], "usage": out["usage"]})
    text = "".join(f"data: {json.dumps(line)}\n\n" for line in lines) + "data: [DONE]\n\n"
    return text.encode()


def test_n_4_gives_4_captured_samples_on_the_topic(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(handler=_upstream)
    base = f"{gw.url}/sessions/grpo/v1"
    messages = [{"role": "user", "content": "q"}]
    r = httpx.post(
        f"{base}/chat/completions", json={"model": "m", "messages": messages, "n": 4}, headers=ADMIN
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert [c["index"] for c in answer["choices"]] == [0, 1, 2, 3]
    assert all("token_ids" not in c for c in answer["choices"])  # capture-only fields stripped
    # the agent continues from choice 0: the next call's prompt extends it
    messages += [answer["choices"][0]["message"], {"role": "user", "content": "more"}]
    r = httpx.post(
        f"{base}/chat/completions", json={"model": "m", "messages": messages}, headers=ADMIN
    )
    assert r.status_code == 200
    closed = httpx.post(f"{gw.url}/sessions/grpo/close", json={}, headers=ADMIN).json()
    assert closed["num_steps"] == 5

    steps = session_steps(session_events, "grpo")
    assert [s.step_index for s in steps] == [0, 1, 2, 3, 4]
    first = steps[0]
    for k, step in enumerate(steps[:4]):
        ids = np.frombuffer(step.response_token_ids, "<i4").tolist()
        assert ids == _ids(k, 1), k
        assert np.allclose(np.frombuffer(step.response_logprobs, "<f4"), _lps(_ids(k, 1)))
        assert step.token_status is TokenStatus.OK and step.error is None
        response = json.loads(step.response_json)
        if k:
            assert step.parent_step_id == first.step_id  # by key, never by position
            assert step.prompt_prefix_len == len(PROMPT) and step.prompt_token_ids == b""
            assert [c["index"] for c in response["choices"]] == [k]
            assert step.usage.completion_tokens == 0  # the call's usage is on choice 0
        else:
            assert len(response["choices"]) == 4 and step.usage.completion_tokens == 14
    assert steps[4].parent_step_id == first.step_id  # the session continued from choice 0
    ordered, flags = order_steps(steps)
    restored, restore_flags = restore_steps(ordered)
    assert flags == [] and restore_flags == []
    for step in restored[:4]:
        assert np.frombuffer(step.prompt_token_ids, "<i4").tolist() == PROMPT
    assert np.frombuffer(restored[4].prompt_token_ids, "<i4").tolist() == [*PROMPT, 9, 9]
    closes = [e.payload for _, e in session_events() if isinstance(e.payload, SessionClosed)]
    assert [c.num_steps for c in closes] == [5]


def test_completions_n_and_a_failed_n_call_keep_indices_contiguous(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(handler=_upstream)
    base = f"{gw.url}/sessions/c/v1"
    r = httpx.post(f"{base}/completions", json={"model": "m", "prompt": "p", "n": 2}, headers=ADMIN)
    assert r.status_code == 200 and len(r.json()["choices"]) == 2
    r = httpx.post(
        f"{base}/completions", json={"model": "broken", "prompt": "p", "n": 3}, headers=ADMIN
    )
    assert r.status_code == 500
    r = httpx.post(f"{base}/completions", json={"model": "m", "prompt": "p"}, headers=ADMIN)
    assert r.status_code == 200
    assert httpx.post(f"{gw.url}/sessions/c/close", json={}, headers=ADMIN).json()["num_steps"] == 4
    steps = session_steps(session_events, "c")
    assert [s.step_index for s in steps] == [0, 1, 2, 3]
    assert [np.frombuffer(s.response_token_ids, "<i4").tolist() for s in steps[:2]] == [
        _ids(0, 1),
        _ids(1, 1),
    ]
    assert steps[2].error is not None and steps[2].error.kind == "upstream_status"
    assert steps[3].error is None


def test_a_streamed_call_with_n_3_captures_every_choice(
    start_gateway: Callable[..., ThreadedServer], session_events: Events
) -> None:
    gw = start_gateway(handler=_upstream)
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "n": 3, "stream": True}
    with httpx.stream(
        "POST", f"{gw.url}/sessions/st/v1/chat/completions", json=body, headers=ADMIN
    ) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    seen = {c["index"] for line in lines for c in json.loads(line[6:])["choices"]}
    assert seen == {0, 1, 2}
    assert (
        httpx.post(f"{gw.url}/sessions/st/close", json={}, headers=ADMIN).json()["num_steps"] == 3
    )
    steps = session_steps(session_events, "st")
    assert [s.step_index for s in steps] == [0, 1, 2]
    for k, step in enumerate(steps):
        assert np.frombuffer(step.response_token_ids, "<i4").tolist() == _ids(k, 1), k
        assert np.allclose(np.frombuffer(step.response_logprobs, "<f4"), _lps(_ids(k, 1)))
        assert step.finish_reason == "stop"
    assert {s.parent_step_id for s in steps[1:]} == {steps[0].step_id}
    restored, flags = restore_steps(order_steps(steps)[0])
    assert flags == []
    assert all(np.frombuffer(s.prompt_token_ids, "<i4").tolist() == PROMPT for s in restored)
