"""OpenAI chat/completions against a vLLM-style upstream: ask for token IDs and logprobs,
read them, and strip what the client did not ask for."""

from __future__ import annotations

from typing import Any

from rllm.producers.gateway.adapters.base import (
    capture_choices,
    first_choice,
    strip_capture,
    usage_of,
    with_capture,
)
from rllm.producers.gateway.types import MAX_CHOICES, Parsed, Sample

__all__ = ["ChatStream", "parse_chat", "prepare_chat"]


def prepare_chat(body: dict[str, Any], capture: bool) -> dict[str, Any]:
    """The upstream body: the client's, plus ``logprobs`` and ``return_token_ids`` to capture."""
    return with_capture(body, capture, logprobs=True, return_token_ids=True)


def _lp_content(choice: dict[str, Any]) -> list[float] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        return None
    return [float(c["logprob"]) for c in lp["content"]]


def parse_chat(body: dict[str, Any], data: Any) -> Parsed:
    """Read token IDs, logprobs and the answer from a chat completion; strip for the client.

    Raises:
        RllmError: the upstream answer is not a chat completion.
    """
    choice = first_choice(data)
    message = choice.get("message") or {}
    return capture_choices(
        body,
        data,
        prompt_ids=data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
        logprobs=_lp_content(choice),
        text=message.get("content") or "",
        tool_calls=message.get("tool_calls"),
        logprobs_of=_lp_content,
    )


class ChatStream:
    """Accumulates a streamed chat completion chunk by chunk and strips each chunk."""

    strip_top = True
    """Whether a chunk's top-level ``prompt_token_ids`` are read and stripped."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.prompt_ids: list[int] | None = None
        self.response_ids: list[int] | None = None
        self.logprobs: list[float] | None = None
        self.text: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.head: dict[str, Any] = {}
        self.others: dict[int, ChatStream] = {}
        """Accumulators of choices 1..n-1 (a call with ``n > 1``), by index."""

    def feed(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """Take one chunk; return it as the client should see it."""
        if not self.head:
            self.head = {k: chunk.get(k) for k in ("id", "created", "model")}
        if self.strip_top and chunk.get("prompt_token_ids") is not None:
            self.prompt_ids = list(chunk["prompt_token_ids"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            if index == 0:
                self._take(choice)
            elif isinstance(index, int) and 0 < index < MAX_CHOICES:
                self.others.setdefault(index, type(self)(self.body))._take(choice)
            strip_capture(choice, self.body, chunk if self.strip_top else None)
        return chunk

    def _logprobs_of(self, choice: dict[str, Any]) -> list[float] | None:
        return _lp_content(choice)

    def _take(self, choice: dict[str, Any]) -> None:
        if choice.get("prompt_token_ids") is not None:
            self.prompt_ids = list(choice["prompt_token_ids"])
        if choice.get("token_ids") is not None:
            self.response_ids = (self.response_ids or []) + list(choice["token_ids"])
        lps = self._logprobs_of(choice)
        if lps is not None:
            self.logprobs = (self.logprobs or []) + lps
        delta = choice.get("delta") or choice
        if delta.get("content"):
            self.text.append(delta["content"])
        if delta.get("text"):
            self.text.append(delta["text"])
        for call in delta.get("tool_calls") or []:
            slot = self.tool_calls.setdefault(
                int(call.get("index", 0)),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            slot["id"] = call.get("id") or slot["id"]
            fn = call.get("function") or {}
            slot["function"]["name"] += fn.get("name") or ""
            slot["function"]["arguments"] += fn.get("arguments") or ""
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def parsed(self) -> Parsed:
        """The whole answer, assembled as a non-streamed chat completion."""
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if calls:
            message["tool_calls"] = calls
        client = {
            **self.head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.usage:
            client["usage"] = self.usage
        return self._parsed(client, calls)

    def _parsed(self, client: Any, tool_calls: list[dict[str, Any]] | None = None) -> Parsed:
        """What was captured so far, with ``client`` as the client's answer (the other
        choices of a call with ``n > 1`` are added to it and to ``more``)."""
        more = []
        for index in sorted(self.others):
            sub = self.others[index].parsed()
            choice = {**sub.client["choices"][0], "index": index}
            client["choices"].append(choice)
            more.append(Sample(choice, sub.response_ids, sub.logprobs, sub.finish_reason))
        return Parsed(
            more=more,
            client=client,
            prompt_ids=self.prompt_ids,
            response_ids=self.response_ids,
            logprobs=self.logprobs,
            finish_reason=self.finish_reason,
            usage=usage_of(self.usage, self.prompt_ids, self.response_ids),
            text="".join(self.text),
            tool_calls=tool_calls if tool_calls is not None else [],
        )
