"""``max_tokens`` fitted to what the upstream's context leaves, and the query a step records."""

from __future__ import annotations

from rllm.producers.gateway.context import Clamp, clamp_max_tokens
from rllm.producers.gateway.routing import redacted_query


def test_max_tokens_over_the_context_is_cut_to_what_the_prompt_leaves() -> None:
    body = {"model": "m", "max_tokens": 32000}
    sent, clamp = clamp_max_tokens(body, 8192, 1000)
    assert sent == {"model": "m", "max_tokens": 7192} and body["max_tokens"] == 32000
    assert clamp == Clamp(asked=32000, sent=7192, context=8192, prompt_tokens=1000)
    assert clamp.note() == {"from": 32000, "to": 7192, "max_model_len": 8192, "prompt_tokens": 1000}


def test_without_the_prompts_length_the_whole_context_is_the_limit() -> None:
    sent, clamp = clamp_max_tokens({"max_completion_tokens": 9000}, 4096, None)
    assert sent == {"max_completion_tokens": 4096}
    assert clamp is not None and (clamp.sent, clamp.prompt_tokens) == (4096, None)


def test_what_fits_is_sent_as_asked_and_a_prompt_over_the_context_leaves_one_token() -> None:
    body = {"max_tokens": 100}
    assert clamp_max_tokens(body, 4096, 3996) == (body, None)
    assert clamp_max_tokens({"messages": []}, 10, 50) == ({"messages": []}, None)
    sent, clamp = clamp_max_tokens(body, 4096, 5000)
    assert sent == {"max_tokens": 1} and clamp is not None and clamp.sent == 1


def test_a_query_keeps_its_values_but_those_that_may_be_secrets() -> None:
    assert redacted_query("beta=true") == "beta=true"
    assert redacted_query("api-key=abc&beta=true&access_token=t") == (
        "api-key=***&beta=true&access_token=***"
    )
    assert redacted_query("") == ""
