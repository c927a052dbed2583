"""Requests and responses in the OpenAI shapes with vLLM's extensions.

With ``return_token_ids`` a chat response carries the prompt's IDs at the top level
(``prompt_token_ids``) and the sampled IDs per choice (``choices[i].token_ids``); a
completions choice carries both (``prompt_token_ids``, ``token_ids``), as vLLM >= 0.10.2
does. Logprobs follow OpenAI: chat ``logprobs.content[{token, logprob, bytes,
top_logprobs}]``, completions ``logprobs{tokens, token_logprobs, top_logprobs,
text_offset}``. Both carry vLLM's ``stop_reason``. vLLM's ``prompt_logprobs: k`` scores
the prompt: per position ``{"<token id>": {logprob, rank, decoded_token}}`` for the prompt
token and the k most likely ones, ``null`` first (per choice in completions, top level in
chat).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from rllm.schemas.sampling import TEMPERATURE_MAX, TOP_P_MIN
from rllm.serving.engine import Completion, PromptLogprobs, SamplingParams
from rllm.serving.errors import RequestError

__all__ = [
    "MAX_PROMPT_LOGPROBS",
    "RequestError",
    "chat_response",
    "completion_response",
    "prompt_logprobs_count",
    "sampling_params",
]

MAX_PROMPT_LOGPROBS = 20
"""Most top tokens per prompt position (vLLM's default ``--max-logprobs``)."""


def sampling_params(body: dict[str, Any], chat: bool) -> SamplingParams:
    """Sampling parameters from an OpenAI request body.

    Raises:
        RequestError: naming the bad field and value.
    """

    def num(name: str, default: float, lo: float, hi: float) -> float:
        value = body.get(name)
        if value is None:
            return default
        if not isinstance(value, int | float) or isinstance(value, bool) or not lo <= value <= hi:
            raise RequestError(f"{name}={value!r} must be a number in [{lo}, {hi}]")
        return float(value)

    if body.get("stream"):
        raise RequestError("stream=true is not supported by the local model server")
    if body.get("logit_bias"):  # an empty one asks for nothing
        raise RequestError(
            f"logit_bias={body['logit_bias']!r} is not supported by the local model server "
            f"(it would be neither applied nor recorded); leave it out"
        )
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise RequestError(f"stop={stop!r} must be a string or a list of strings")
    max_tokens = body.get("max_completion_tokens") if chat else None
    max_tokens = max_tokens if max_tokens is not None else body.get("max_tokens")
    if chat:
        top = int(num("top_logprobs", 0, 0, 20)) if body.get("logprobs") else 0
    else:
        top = int(num("logprobs", 0, 0, 20))
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise RequestError(f"seed={seed!r} must be an integer")
    top_k = body.get("top_k")
    top_k = 0 if top_k is None else top_k
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < -1:
        raise RequestError(f"top_k={top_k!r} must be an integer, -1 or 0 for no limit")
    return SamplingParams(
        temperature=num("temperature", 1.0, 0.0, TEMPERATURE_MAX),
        top_p=num("top_p", 1.0, TOP_P_MIN, 1.0),
        max_tokens=(16 if not chat else 1 << 20)
        if max_tokens is None
        else _positive("max_tokens", max_tokens),
        stop=tuple(stop),
        n=int(num("n", 1, 1, 128)),
        seed=seed,
        top_logprobs=top,
        top_k=max(top_k, 0),
    )


def prompt_logprobs_count(body: dict[str, Any]) -> int | None:
    """vLLM's ``prompt_logprobs``: None (not asked) or the top tokens per position.

    Raises:
        RequestError: naming the bad value, or ``stream`` together with it.
    """
    value = body.get("prompt_logprobs")
    if value is None:
        return None
    if isinstance(value, bool):  # True is how some clients ask for the prompt's own token
        return 0 if value else None
    if not isinstance(value, int) or not 0 <= value <= MAX_PROMPT_LOGPROBS:
        raise RequestError(
            f"prompt_logprobs={value!r} must be an integer in [0, {MAX_PROMPT_LOGPROBS}]"
        )
    return value


def _prompt_logprobs_json(
    tokenizer: Any, rows: PromptLogprobs | None
) -> list[dict[str, Any] | None] | None:
    if rows is None:
        return None
    return [
        None
        if row is None
        else {
            str(tok): {"logprob": lp, "rank": rank, "decoded_token": _token_text(tokenizer, tok)}
            for tok, (lp, rank) in row.items()
        }
        for row in rows
    ]


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(f"{name}={value!r} must be a positive integer")
    return value


def _usage(prompt_len: int, outs: list[Completion]) -> dict[str, Any]:
    completion = sum(len(o.token_ids) for o in outs)
    return {
        "prompt_tokens": prompt_len,
        "completion_tokens": completion,
        "total_tokens": prompt_len + completion,
        "prompt_tokens_details": None,
    }


def _answer(
    id_prefix: str,
    kind: str,
    model: str,
    choices: list[dict[str, Any]],
    usage: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    """The body vLLM wraps its ``choices`` in (``kind``: its ``object``), a fresh
    ``<id_prefix>-<hex>`` id; ``extra`` fields follow ``usage``."""
    return {
        "id": f"{id_prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage,
        **extra,
        "kv_transfer_params": None,
    }


def _token_text(tokenizer: Any, tok: int) -> str:
    return str(tokenizer.decode([tok]))


def _chat_logprobs(tokenizer: Any, out: Completion) -> dict[str, Any]:
    content = []
    for tok, lp, tops in zip(out.token_ids, out.logprobs, out.top_logprobs, strict=True):
        text = _token_text(tokenizer, tok)
        content.append(
            {
                "token": text,
                "logprob": lp,
                "bytes": list(text.encode()),
                "top_logprobs": [
                    {
                        "token": (t := _token_text(tokenizer, j)),
                        "logprob": v,
                        "bytes": list(t.encode()),
                    }
                    for j, v in tops
                ],
            }
        )
    return {"content": content}


def chat_response(
    model: str,
    prompt_ids: list[int],
    outs: list[Completion],
    tokenizer: Any,
    want_logprobs: bool,
    want_ids: bool,
    prompt_logprobs: PromptLogprobs | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` body as vLLM returns it."""
    choices: list[dict[str, Any]] = [
        {
            "index": i,
            "message": {
                "role": "assistant",
                "content": o.text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            },
            "logprobs": _chat_logprobs(tokenizer, o) if want_logprobs else None,
            "finish_reason": o.finish_reason,
            "stop_reason": o.stop_reason,
            "token_ids": list(o.token_ids) if want_ids else None,
        }
        for i, o in enumerate(outs)
    ]
    return _answer(
        "chatcmpl",
        "chat.completion",
        model,
        choices,
        _usage(len(prompt_ids), outs),
        prompt_logprobs=_prompt_logprobs_json(tokenizer, prompt_logprobs),
        prompt_token_ids=list(prompt_ids) if want_ids else None,
    )


def _completion_logprobs(tokenizer: Any, out: Completion) -> dict[str, Any]:
    tokens = [_token_text(tokenizer, t) for t in out.token_ids]
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {
        "text_offset": offsets,
        "token_logprobs": list(out.logprobs),
        "tokens": tokens,
        "top_logprobs": [
            {_token_text(tokenizer, j): v for j, v in tops} or None for tops in out.top_logprobs
        ],
    }


def completion_response(
    model: str,
    prompt_ids: list[list[int]],
    outs: list[list[Completion]],
    tokenizer: Any,
    want_logprobs: bool,
    want_ids: bool,
    prompt_logprobs: list[PromptLogprobs] | None = None,
) -> dict[str, Any]:
    """A ``text_completion`` body as vLLM returns it (n choices per prompt, in order)."""
    choices: list[dict[str, Any]] = []
    index = 0
    scored: list[PromptLogprobs | None] = (
        list(prompt_logprobs) if prompt_logprobs is not None else [None] * len(prompt_ids)
    )
    for prompt, group, rows in zip(prompt_ids, outs, scored, strict=True):
        rendered = _prompt_logprobs_json(tokenizer, rows)
        for o in group:
            choices.append(
                {
                    "index": index,
                    "text": o.text,
                    "logprobs": _completion_logprobs(tokenizer, o) if want_logprobs else None,
                    "finish_reason": o.finish_reason,
                    "stop_reason": o.stop_reason,
                    "prompt_logprobs": rendered,
                    "prompt_token_ids": list(prompt) if want_ids else None,
                    "token_ids": list(o.token_ids) if want_ids else None,
                }
            )
            index += 1
    usage = _usage(sum(len(p) for p in prompt_ids), [o for g in outs for o in g])
    return _answer("cmpl", "text_completion", model, choices, usage)
