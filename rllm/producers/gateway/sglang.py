"""SGLang's native ``/generate`` (token-in, token-out) behind the OpenAI APIs.

The prompt is built with the model's chat template through its tokenizer (the IDs the model
then sees), loaded once when the gateway starts; the sampled IDs and logprobs come from
SGLang's answer. The answer is returned in the vLLM shape (``prompt_token_ids``,
``token_ids``, ``logprobs``; one choice per sample of ``n``) so the chat and completions
adapters read it like any other; ``sglang_stream`` does the same for a streamed answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from rllm.errors import ConfigError
from rllm.producers.gateway.adapters.base import renamed

if TYPE_CHECKING:
    from rllm.producers.gateway.upstreams import Upstream

__all__ = [
    "SglangGenerate",
    "chat_logprobs",
    "choice_of",
    "completion_logprobs",
    "load_tokenizer",
    "sampling_for_generate",
    "usage_of_samples",
]

log = logging.getLogger("rllm.gateway")

_RENAME = {"max_tokens": "max_new_tokens", "max_completion_tokens": "max_new_tokens"}
_KEEP = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "n",
)


def sampling_for_generate(body: dict[str, Any]) -> dict[str, Any]:
    """SGLang ``sampling_params`` for an OpenAI request body."""
    out = {k: body[k] for k in _KEEP if body.get(k) is not None}
    out.update(renamed(body, _RENAME))
    return out


def load_tokenizer(name: str | None) -> Any:
    """The model's tokenizer (transformers), for the chat template of an sglang upstream.

    Raises:
        ConfigError: no tokenizer named, or it cannot be loaded (the message names it).
    """
    if not name:
        raise ConfigError(
            "the sglang upstream needs the model's tokenizer for its chat template: pass "
            "--tokenizer NAME_OR_PATH or RLLM_GATEWAY_TOKENIZER"
        )
    t0 = time.perf_counter()
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)  # type: ignore[no-untyped-call]  # untyped
    except Exception as exc:  # whatever stops it loading, the named tokenizer is the problem
        raise ConfigError(
            f"cannot load the tokenizer {name!r} for the sglang upstream "
            f"({type(exc).__name__}: {str(exc)[:300]}); pass --tokenizer with a Hugging Face "
            "name or a local folder that holds the model's tokenizer"
        ) from exc
    log.info("tokenizer %s loaded in %.1f s", name, time.perf_counter() - t0)
    return tokenizer


def choice_of(out: dict[str, Any], index: int, chat: bool) -> dict[str, Any]:
    """One ``/generate`` output (a whole sample) as a vLLM-shaped choice."""
    meta = out.get("meta_info") or {}
    lps = meta.get("output_token_logprobs") or []
    ids = out.get("output_ids") or [int(x[1]) for x in lps]
    finish = meta.get("finish_reason") or {}
    reason = finish.get("type", "stop") if isinstance(finish, dict) else str(finish)
    text = str(out.get("text") or "")
    choice: dict[str, Any] = {
        "index": index,
        "finish_reason": reason,
        "token_ids": [int(i) for i in ids],
    }
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        choice["logprobs"] = chat_logprobs([float(x[0]) for x in lps])
    else:
        choice["text"] = text
        choice["logprobs"] = completion_logprobs([float(x[0]) for x in lps])
    return choice


def chat_logprobs(values: list[float]) -> dict[str, Any]:
    """Chat ``logprobs`` for sampled tokens (SGLang gives no token text here)."""
    return {
        "content": [{"token": "", "logprob": v, "bytes": None, "top_logprobs": []} for v in values]
    }


def completion_logprobs(values: list[float]) -> dict[str, Any]:
    """Completions ``logprobs`` for sampled tokens."""
    return {"tokens": [""] * len(values), "token_logprobs": values}


def usage_of_samples(prompt_ids: list[int], completion_tokens: int) -> dict[str, int]:
    """OpenAI usage of a call: the prompt once, the tokens of every sample."""
    return {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": completion_tokens,
        "total_tokens": len(prompt_ids) + completion_tokens,
    }


class SglangGenerate:
    """Serves chat and completions requests through ``POST /generate``.

    Args:
        tokenizer: the model's tokenizer, already loaded (``load_tokenizer``).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        """The prompt token IDs: the chat template applied, or the completion prompt encoded."""
        tok = self.tokenizer
        if chat:
            kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": True}
            if body.get("tools"):
                kwargs["tools"] = body["tools"]
            ids = tok.apply_chat_template(body["messages"], **kwargs)
            ids = ids["input_ids"] if isinstance(ids, dict) else ids
        else:
            prompt = body["prompt"]
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
                return [int(i) for i in prompt]
            text = prompt[0] if isinstance(prompt, list) else prompt
            ids = tok(str(text))["input_ids"]
        return [int(i) for i in ids]

    def request(self, body: dict[str, Any], prompt_ids: list[int], stream: bool) -> dict[str, Any]:
        """The ``/generate`` request for an OpenAI request body."""
        return {
            "input_ids": prompt_ids,
            "sampling_params": sampling_for_generate(body),
            "return_logprob": True,
            "stream": stream,
        }

    async def complete(
        self,
        upstream: Upstream,
        body: dict[str, Any],
        chat: bool,
        headers: dict[str, str],
        prompt_ids: list[int],
    ) -> dict[str, Any]:
        """Call ``/generate`` with the prompt's IDs (``prompt_ids(body, chat)``); return a
        vLLM-shaped chat completion or completion (``n`` samples come back as a list: one
        choice each, in order)."""
        data = await upstream.post_json("/generate", self.request(body, prompt_ids, False), headers)
        outs = data if isinstance(data, list) else [data]
        choices = [choice_of(out, k, chat) for k, out in enumerate(outs)]
        return {
            "id": f"gen-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "object": "chat.completion" if chat else "text_completion",
            "model": body.get("model"),
            "prompt_token_ids": prompt_ids,
            "choices": choices,
            "usage": usage_of_samples(prompt_ids, sum(len(c["token_ids"]) for c in choices)),
        }

    async def open_stream(
        self,
        upstream: Upstream,
        body: dict[str, Any],
        headers: dict[str, str],
        prompt_ids: list[int],
    ) -> httpx.Response:
        """Open a streamed ``/generate`` call with the prompt's IDs; return the open response.

        Raises:
            UpstreamFailure: non-2xx status, timeout or unreachable.
        """
        return await upstream.open_stream(
            "/generate", self.request(body, prompt_ids, True), headers
        )
