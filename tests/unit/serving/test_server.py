"""The local model server: vLLM-shaped token IDs and logprobs consistent with the model,
sampling parameters, batching, policy version reporting and reload."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from starlette.testclient import TestClient

from rllm.models.loading import load_model
from rllm.serving.app import POLICY_HEADER, create_app
from rllm.serving.engine import Engine

CHAT = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "What is 7 times 8?"}],
    "max_tokens": 12,
    "temperature": 1.0,
    "logprobs": True,
    "top_logprobs": 2,
    "return_token_ids": True,
    "seed": 3,
}


@pytest.fixture
def engine(tiny_model: Path) -> Engine:
    return Engine(load_model(str(tiny_model)))


@pytest.fixture
def client(engine: Engine) -> Any:
    with TestClient(create_app(engine, "tiny", max_batch=32, batch_wait_ms=150)) as c:
        yield c


def _recompute(engine: Engine, prompt: list[int], response: list[int]) -> list[float]:
    with torch.no_grad():
        logits = engine.model(torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + k, tok]) for k, tok in enumerate(response)]


def test_chat_returns_vllm_token_ids_and_logprobs_consistent_with_model(
    client: Any, engine: Engine
) -> None:
    r = client.post("/v1/chat/completions", json={**CHAT, "n": 2})
    assert r.status_code == 200, r.text
    assert r.headers[POLICY_HEADER] == "0"
    body = r.json()
    assert body["object"] == "chat.completion"
    prompt = body["prompt_token_ids"]
    expected_prompt = engine.tokenizer.apply_chat_template(
        CHAT["messages"], add_generation_prompt=True
    )
    assert prompt == list(expected_prompt)
    assert len(body["choices"]) == 2
    for choice in body["choices"]:
        ids = choice["token_ids"]
        content = choice["logprobs"]["content"]
        assert 1 <= len(ids) <= 12 and len(content) == len(ids)
        assert {"token", "logprob", "bytes", "top_logprobs"} <= set(content[0])
        assert len(content[0]["top_logprobs"]) == 2
        lps = [c["logprob"] for c in content]
        assert lps == pytest.approx(_recompute(engine, prompt, ids), abs=1e-4)
        assert choice["message"]["content"] == engine.tokenizer.decode(
            ids, skip_special_tokens=True
        )
        assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(prompt)
    assert usage["completion_tokens"] == sum(len(c["token_ids"]) for c in body["choices"])


def test_completions_shape_and_token_prompt(client: Any, engine: Engine) -> None:
    r = client.post(
        "/v1/completions",
        json={
            "prompt": [5, 6, 7, 8],
            "max_tokens": 5,
            "logprobs": 1,
            "return_token_ids": True,
            "temperature": 0,
        },
    )
    assert r.status_code == 200, r.text
    (choice,) = r.json()["choices"]
    assert choice["prompt_token_ids"] == [5, 6, 7, 8]
    ids = choice["token_ids"]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["text_offset"]) == len(ids)
    assert lp["token_logprobs"] == pytest.approx(_recompute(engine, [5, 6, 7, 8], ids), abs=1e-4)
    # temperature 0 is greedy: each sampled token is the argmax, i.e. its own top-1
    for tok, top in zip(lp["tokens"], lp["top_logprobs"], strict=True):
        assert max(top, key=top.get) == tok


def test_seed_is_reproducible_and_token_ids_omitted_unless_asked(client: Any) -> None:
    a = client.post("/v1/chat/completions", json=CHAT).json()
    b = client.post("/v1/chat/completions", json=CHAT).json()
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
    plain = client.post(
        "/v1/chat/completions", json={**CHAT, "return_token_ids": False, "logprobs": False}
    ).json()
    assert plain["prompt_token_ids"] is None and plain["choices"][0]["token_ids"] is None
    assert plain["choices"][0]["logprobs"] is None


def test_stop_strings_and_max_tokens(client: Any) -> None:
    r = client.post(
        "/v1/completions",
        json={"prompt": "ab", "max_tokens": 3, "seed": 1, "return_token_ids": True},
    ).json()
    assert len(r["choices"][0]["token_ids"]) == 3 and r["choices"][0]["finish_reason"] == "length"
    full = client.post(
        "/v1/completions", json={"prompt": "ab", "max_tokens": 30, "seed": 1, "top_p": 0.9}
    ).json()["choices"][0]["text"]
    stop = full[4:6]
    got = client.post(
        "/v1/completions",
        json={"prompt": "ab", "max_tokens": 30, "seed": 1, "top_p": 0.9, "stop": [stop]},
    ).json()
    choice = got["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    assert choice["text"] == full[: full.find(stop)]


def test_concurrent_requests_are_batched(client: Any) -> None:
    app_batcher = client.app.state.batcher
    app_batcher.batches.clear()
    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(
                lambda i: client.post("/v1/chat/completions", json={**CHAT, "seed": i}), range(6)
            )
        )
    assert all(r.status_code == 200 for r in results)
    new = list(app_batcher.batches)
    assert sum(new) == 6 and max(new) > 1, new


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"messages": []}, "messages"),
        ({**CHAT, "temperature": -1}, "temperature=-1"),
        ({**CHAT, "stream": True}, "stream"),
        ({**CHAT, "max_tokens": 0}, "max_tokens=0"),
    ],
)
def test_bad_requests_get_400_with_reason(client: Any, body: dict[str, Any], fragment: str) -> None:
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and fragment in r.json()["error"]["message"]


def test_models_reports_version_and_admin_reload_changes_outputs(
    client: Any, engine: Engine, tmp_path: Path
) -> None:
    before = client.post(
        "/v1/completions", json={"prompt": [5, 6], "max_tokens": 4, "logprobs": 0, "temperature": 0}
    ).json()
    new = load_model(str(client.app.state.engine.source))
    with torch.no_grad():
        for p in new.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    new.model.save_pretrained(tmp_path / "ckpt")
    r = client.post(
        "/admin/reload", json={"checkpoint_uri": (tmp_path / "ckpt").as_uri(), "version": 7}
    )
    assert r.status_code == 200 and r.json()["policy_version"] == 7
    models = client.get("/v1/models")
    assert models.json()["data"][0]["policy_version"] == 7 and models.headers[POLICY_HEADER] == "7"
    after = client.post(
        "/v1/completions", json={"prompt": [5, 6], "max_tokens": 4, "logprobs": 0, "temperature": 0}
    ).json()
    assert (
        after["choices"][0]["logprobs"]["token_logprobs"]
        != before["choices"][0]["logprobs"]["token_logprobs"]
    )
    bad = client.post(
        "/admin/reload", json={"checkpoint_uri": str(tmp_path / "nope"), "version": 8}
    )
    assert bad.status_code == 400 and "safetensors" in bad.json()["error"]["message"]


def test_repeated_prompts_prefill_once_and_sample_as_if_alone(engine: Engine) -> None:
    """A group's samples share a prompt: the engine runs it once, and each row still gets
    what it would get alone (its own seed, its own tokens and logprobs)."""
    from rllm.serving.engine import SamplingParams

    a, b = [5, 6, 7, 8, 9], [11, 12, 13]
    prompts = [a, b, a, a, b]
    # rows finish at different lengths: finished rows leave the batch as it goes on
    params = [
        SamplingParams(temperature=1.0, max_tokens=n, seed=s) for s, n in enumerate([6, 2, 6, 1, 4])
    ]
    calls: list[int] = []
    forward = engine.model.forward

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(int(kwargs["input_ids"].shape[0]))
        return forward(*args, **kwargs)

    engine.model.forward = counting
    try:
        together = engine.generate(prompts, params)
    finally:
        del engine.model.forward
    assert calls[0] == 2, f"prefill ran {calls[0]} rows for 2 distinct prompts"
    # rows leave once a quarter of the batch has finished: 5,5 (1 of 5 done), then 3, 3, 2
    assert calls[1:] == [5, 5, 3, 3, 2], "decode batch sizes as rows finish"
    for p, sp, got in zip(prompts, params, together, strict=True):
        alone = engine.generate([p], [sp])[0]
        assert got.token_ids == alone.token_ids and len(got.token_ids) == sp.max_tokens
        assert got.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert got.logprobs == pytest.approx(_recompute(engine, p, got.token_ids), abs=1e-4)
    assert together[0].token_ids != together[2].token_ids  # seeds 0 and 2 differ
