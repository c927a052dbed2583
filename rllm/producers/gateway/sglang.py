"""SGLang's native ``/generate`` (token-in, token-out) behind the OpenAI APIs.

The prompt is built with the model's chat template through its tokenizer (the IDs the model
then sees); the sampled IDs and logprobs come from SGLang's answer. The answer is returned
in the vLLM shape (``prompt_token_ids``, ``token_ids``, ``logprobs``) so the chat and
completions adapters read it like any other.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from .adapters.base import sse
from .upstreams import UpstreamFailure

if TYPE_CHECKING:
    from .upstreams import Upstream

__all__ = ["SglangGenerate", "replay_chunks", "sampling_for_generate"]

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
    for src, dst in _RENAME.items():
        if body.get(src) is not None:
            out[dst] = body[src]
    return out


class SglangGenerate:
    """Serves chat and completions requests through ``POST /generate``."""

    def __init__(self, tokenizer_name: str | None) -> None:
        self._name = tokenizer_name
        self._tokenizer: Any = None
        self._lock = asyncio.Lock()

    async def tokenizer(self) -> Any:
        """The model's tokenizer, loaded once (transformers)."""
        async with self._lock:
            if self._tokenizer is None:
                if not self._name:
                    raise UpstreamFailure(
                        "gateway",
                        500,
                        b'{"error":{"message":"the sglang upstream needs RLLM_GATEWAY_TOKENIZER"}}',
                        "the sglang upstream needs a tokenizer (--tokenizer)",
                    )
                from transformers import AutoTokenizer

                self._tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, self._name)
        return self._tokenizer

    async def prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        """The prompt token IDs: the chat template applied, or the completion prompt encoded."""
        tok = await self.tokenizer()
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

    async def complete(
        self, upstream: Upstream, body: dict[str, Any], chat: bool, headers: dict[str, str]
    ) -> dict[str, Any]:
        """Call ``/generate``; return a vLLM-shaped chat completion or completion."""
        prompt_ids = await self.prompt_ids(body, chat)
        request = {
            "input_ids": prompt_ids,
            "sampling_params": sampling_for_generate(body),
            "return_logprob": True,
            "stream": False,
        }
        data = await upstream.post_json("/generate", request, headers)
        if isinstance(data, list):
            data = data[0]
        meta = data.get("meta_info") or {}
        lps = meta.get("output_token_logprobs") or []
        ids = data.get("output_ids") or [int(x[1]) for x in lps]
        finish = meta.get("finish_reason") or {}
        reason = finish.get("type", "stop") if isinstance(finish, dict) else str(finish)
        text = str(data.get("text", ""))
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": reason,
            "token_ids": [int(i) for i in ids],
        }
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
            choice["logprobs"] = {
                "content": [
                    {"token": "", "logprob": float(x[0]), "bytes": None, "top_logprobs": []}
                    for x in lps
                ]
            }
        else:
            choice["text"] = text
            choice["logprobs"] = {
                "tokens": [""] * len(lps),
                "token_logprobs": [float(x[0]) for x in lps],
            }
        return {
            "id": f"gen-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "object": "chat.completion" if chat else "text_completion",
            "model": body.get("model"),
            "prompt_token_ids": prompt_ids,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(ids),
                "total_tokens": len(prompt_ids) + len(ids),
            },
        }


def replay_chunks(answer: dict[str, Any], chat: bool) -> list[bytes]:
    """A finished chat completion or completion as OpenAI stream chunks."""
    head = {k: answer.get(k) for k in ("id", "created", "model")}
    obj = "chat.completion.chunk" if chat else "text_completion"
    out = []
    for choice in answer["choices"]:
        if chat:
            delta = {k: v for k, v in choice["message"].items() if v is not None}
            first = {"index": choice["index"], "delta": delta, "finish_reason": None}
            last = {"index": choice["index"], "delta": {}, "finish_reason": choice["finish_reason"]}
        else:
            first = {"index": choice["index"], "text": choice["text"], "finish_reason": None}
            last = {"index": choice["index"], "text": "", "finish_reason": choice["finish_reason"]}
        out.append(sse({**head, "object": obj, "choices": [first]}))
        out.append(sse({**head, "object": obj, "choices": [last]}))
    out.append(b"data: [DONE]\n\n")
    return out
