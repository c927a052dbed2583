"""SGLang's streamed ``/generate`` outputs as vLLM-shaped OpenAI chunks, as they come.

SGLang streams each sample's output so far (its default) or only what is new (with
``--incremental-streaming-output``); either way every chunk made here carries only the new
text, token IDs and logprobs of one sample (``index`` for ``n > 1``), the first one the
prompt's IDs, then a finish chunk per sample, and a usage chunk at the end.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from rllm.producers.gateway.sglang import chat_logprobs, completion_logprobs, usage_of_samples

__all__ = ["GenerateStream"]


@dataclass
class _Sample:
    """What one sample streamed so far."""

    ids: list[int] = field(default_factory=list)
    logprobs: int = 0
    """How many of its logprobs were taken."""
    text: str = ""
    started: bool = False
    finished: bool = False


def _is_whole(ids: list[int], seen: list[int], completion_tokens: Any) -> bool:
    """Whether an output carries the sample's whole output so far (SGLang's default) rather
    than only its new tokens: it extends what was seen and counts every token."""
    if not seen:
        return True  # the first output is both
    extends = len(ids) >= len(seen) and ids[: len(seen)] == seen
    return extends and (not isinstance(completion_tokens, int) or len(ids) == completion_tokens)


class GenerateStream:
    """Turns one streamed ``/generate`` call's outputs into chat or completion chunks.

    Args:
        body: the client's OpenAI request.
        chat: chat completions (else completions).
        prompt_ids: the prompt's token IDs sent to ``/generate``.
    """

    def __init__(self, body: dict[str, Any], chat: bool, prompt_ids: list[int]) -> None:
        self.chat = chat
        self.prompt_ids = prompt_ids
        self.head = {
            "id": f"gen-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model"),
        }
        self.samples: dict[int, _Sample] = {}

    def feed(self, out: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunks for one ``/generate`` output: its new part, then its finish."""
        index = out.get("index", 0)
        index = index if isinstance(index, int) else 0
        sample = self.samples.setdefault(index, _Sample())
        meta = out.get("meta_info") or {}
        lps = meta.get("output_token_logprobs") or []
        ids = out.get("output_ids")
        ids = [int(i) for i in (ids if ids is not None else [x[1] for x in lps])]
        text = str(out.get("text") or "")
        if _is_whole(ids, sample.ids, meta.get("completion_tokens")):
            ids, lps = ids[len(sample.ids) :], lps[sample.logprobs :]
            text = text[len(sample.text) :]
        sample.ids += ids
        sample.logprobs += len(lps)
        sample.text += text
        chunks = []
        if ids or text or not sample.started:
            chunks.append(self._part(index, sample, text, ids, [float(x[0]) for x in lps]))
        finish = meta.get("finish_reason")
        if finish and not sample.finished:
            sample.finished = True
            reason = finish.get("type", "stop") if isinstance(finish, dict) else str(finish)
            end: dict[str, Any] = {"index": index, "finish_reason": reason}
            if self.chat:
                end["delta"] = {}
            else:
                end["text"] = ""
            chunks.append({**self.head, "choices": [end]})
        return chunks

    def _part(
        self, index: int, sample: _Sample, text: str, ids: list[int], lps: list[float]
    ) -> dict[str, Any]:
        first = not sample.started
        sample.started = True
        choice: dict[str, Any] = {"index": index, "token_ids": ids, "finish_reason": None}
        chunk: dict[str, Any] = {**self.head, "choices": [choice]}
        if self.chat:
            choice["delta"] = {"role": "assistant", "content": text} if first else {"content": text}
            choice["logprobs"] = chat_logprobs(lps)
            if first and len(self.samples) == 1:
                chunk["prompt_token_ids"] = self.prompt_ids
        else:
            choice["text"] = text
            choice["logprobs"] = completion_logprobs(lps)
            if first:
                choice["prompt_token_ids"] = self.prompt_ids
        return chunk

    def end(self) -> list[dict[str, Any]]:
        """The usage chunk: the prompt once, every sample's tokens."""
        tokens = sum(len(s.ids) for s in self.samples.values())
        return [{**self.head, "choices": [], "usage": usage_of_samples(self.prompt_ids, tokens)}]

    async def chunks(
        self, outs: AsyncGenerator[dict[str, Any], None]
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The chunks of every output of ``outs`` as they come, then the usage chunk."""
        async with contextlib.aclosing(outs):
            async for out in outs:
                for chunk in self.feed(out):
                    yield chunk
        for chunk in self.end():
            yield chunk
