"""OpenAI (legacy) completions against a vLLM-style upstream."""

from __future__ import annotations

from typing import Any

from rllm.errors import RllmError

from .base import Parsed, usage_of
from .chat import ChatStream, asked_ids, asked_logprobs

__all__ = ["CompletionStream", "parse_completion", "prepare_completion"]


def prepare_completion(body: dict[str, Any], capture: bool) -> dict[str, Any]:
    """The upstream body, asking for the sampled token's logprob and the token IDs."""
    if not capture:
        return body
    out = dict(body)
    if not asked_logprobs(body):
        out["logprobs"] = 0
    out["return_token_ids"] = True
    return out


def _strip(choice: dict[str, Any], body: dict[str, Any]) -> None:
    if not asked_ids(body):
        choice.pop("token_ids", None)
        choice.pop("prompt_token_ids", None)
    if not asked_logprobs(body) and "logprobs" in choice:
        choice["logprobs"] = None


def _logprobs(choice: dict[str, Any]) -> list[float] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
        return None
    return [float(x) for x in lp["token_logprobs"]]


def parse_completion(body: dict[str, Any], data: Any) -> Parsed:
    """Read token IDs and logprobs from a completion; strip for the client.

    Raises:
        RllmError: the upstream answer is not a completion.
    """
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("choices"), list)
        or not data["choices"]
    ):
        raise RllmError("upstream answer has no choices")
    choice = data["choices"][0]
    prompt_ids = choice.get("prompt_token_ids") or data.get("prompt_token_ids")
    response_ids = choice.get("token_ids")
    parsed = Parsed(
        client=data,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        logprobs=_logprobs(choice),
        finish_reason=choice.get("finish_reason"),
        usage=usage_of(data.get("usage"), prompt_ids, response_ids),
        text=choice.get("text") or "",
    )
    for c in data["choices"]:
        _strip(c, body)
    return parsed


class CompletionStream(ChatStream):
    """Accumulates a streamed completion."""

    def feed(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """Take one chunk; return it as the client should see it."""
        if not self.head:
            self.head = {k: chunk.get(k) for k in ("id", "created", "model")}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == 0:
                self._take(choice)
                lps = _logprobs(choice)
                if lps is not None:
                    self.logprobs = (self.logprobs or []) + lps
            _strip(choice, self.body)
        return chunk

    def parsed(self) -> Parsed:
        """The whole answer as a non-streamed completion."""
        client = {
            **self.head,
            "object": "text_completion",
            "choices": [
                {"index": 0, "text": "".join(self.text), "finish_reason": self.finish_reason}
            ],
        }
        return Parsed(
            client=client,
            prompt_ids=self.prompt_ids,
            response_ids=self.response_ids,
            logprobs=self.logprobs,
            finish_reason=self.finish_reason,
            usage=usage_of(self.usage, self.prompt_ids, self.response_ids),
            text="".join(self.text),
        )
