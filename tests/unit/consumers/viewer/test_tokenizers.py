"""Sampled tokens are shown as text: the answer's, else the run's tokenizer's when this
machine holds it (the installed SmolLM2-135M here), else IDs with the reason."""

from __future__ import annotations

from rllm.consumers.viewer import turns
from rllm.consumers.viewer.tokenizers import decoder_for
from rllm.models.loading import load_tokenizer

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_the_installed_model_decodes_its_own_token_ids() -> None:
    tokenizer = load_tokenizer("")
    ids = tokenizer.encode("The answer is 56", add_special_tokens=False)
    decode = decoder_for(SMOLLM2)
    assert decode is not None
    toks = turns.tokens("chat", {"choices": [{}]}, ids, [-0.5] * len(ids), decode)
    assert [t.token_id for t in toks] == ids
    assert "".join(t.text for t in toks) == "The answer is 56"
    assert len(toks) > 1 and all(t.text for t in toks)


def test_the_answers_own_token_texts_come_first() -> None:
    response = {"choices": [{"logprobs": {"tokens": ["a", "b"]}}]}
    toks = turns.tokens("completions", response, [1, 2], [-1.0, -2.0], lambda i: f"<{i}>")
    assert [t.text for t in toks] == ["a", "b"]


def test_a_model_without_a_tokenizer_here_has_no_decoder() -> None:
    assert decoder_for("calc-model") is None
    assert decoder_for("org/other-model-7b") is None
