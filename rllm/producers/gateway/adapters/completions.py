"""OpenAI (legacy) completions against a vLLM-style upstream."""

from __future__ import annotations

from typing import Any

from rllm.producers.gateway.adapters.base import (
    asked_logprobs,
    capture_choices,
    first_choice,
    with_capture,
)
from rllm.producers.gateway.adapters.chat import ChatStream
from rllm.producers.gateway.types import Parsed

__all__ = ["CompletionStream", "parse_completion", "prepare_completion"]


def prepare_completion(body: dict[str, Any], capture: bool) -> dict[str, Any]:
    """The upstream body, asking for the sampled token's logprob and the token IDs."""
    sampled = {} if asked_logprobs(body) else {"logprobs": 0}
    return with_capture(body, capture, **sampled, return_token_ids=True)


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
    choice = first_choice(data)
    return capture_choices(
        body,
        data,
        prompt_ids=choice.get("prompt_token_ids") or data.get("prompt_token_ids"),
        logprobs=_logprobs(choice),
        text=choice.get("text") or "",
        strip_top=False,
        logprobs_of=_logprobs,
    )


class CompletionStream(ChatStream):
    """Accumulates a streamed completion."""

    strip_top = False

    def _logprobs_of(self, choice: dict[str, Any]) -> list[float] | None:
        return _logprobs(choice)

    def parsed(self) -> Parsed:
        """The whole answer as a non-streamed completion."""
        client = {
            **self.head,
            "object": "text_completion",
            "choices": [
                {"index": 0, "text": "".join(self.text), "finish_reason": self.finish_reason}
            ],
        }
        return self._parsed(client)
