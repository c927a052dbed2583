"""The cached Hugging Face copy of SmolLM2 behaves exactly like the GGUF it came from:
same chat-templated token ids, same stop tokens, same logits. Needs the real GGUF
(``rllm-cli model install-local``); CI provisions it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rllm.models.loading import load_model, stop_token_ids
from rllm.models.local import SMOLLM2_GGUF, gguf_dir, hf_copy_complete, hf_dir

INSTALLED = gguf_dir() / SMOLLM2_GGUF

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _installed() -> None:
    """CI installs the GGUF (.ci/run); elsewhere a missing one fails with what to run."""
    if not INSTALLED.is_file():
        pytest.fail(f"{INSTALLED} missing: run `rllm-cli model install-local` first")


MESSAGES = [
    {"role": "system", "content": "You are a careful Python programmer."},
    {"role": "user", "content": 'def add(a, b):\n    """Return a + b."""\n'},
    {"role": "assistant", "content": "```python\ndef add(a, b):\n    return a + b\n```"},
    {"role": "user", "content": "Now ünïcödé: 数字 and émojis 🙂?"},
]


def _ids(tokenizer: object, messages: list[dict[str, str]]) -> list[int]:
    out = tokenizer.apply_chat_template(  # type: ignore[attr-defined]  # the GGUF and the HF tokenizer both have it
        messages, add_generation_prompt=True, tokenize=True
    )
    return list(out if isinstance(out, list) else out["input_ids"])


def test_hf_copy_matches_the_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    gguf_dir(home).mkdir(parents=True)
    (gguf_dir(home) / SMOLLM2_GGUF).symlink_to(INSTALLED)
    monkeypatch.setenv("RLLM_HOME", str(home))

    first = load_model()  # from the GGUF; writes the copy
    assert first.source.endswith(SMOLLM2_GGUF)
    assert hf_copy_complete(home)
    second = load_model()
    assert second.source == str(hf_dir(home))

    ids_gguf, ids_hf = _ids(first.tokenizer, MESSAGES), _ids(second.tokenizer, MESSAGES)
    assert ids_hf == ids_gguf
    assert len(ids_gguf) > 40
    text = first.tokenizer.decode(ids_gguf)
    assert "<|im_start|>assistant" in text and "数字" in text
    assert stop_token_ids(second.tokenizer, second.model) == stop_token_ids(
        first.tokenizer, first.model
    )
    assert second.tokenizer.pad_token_id == first.tokenizer.pad_token_id
    with torch.inference_mode():
        batch = torch.tensor([ids_gguf])
        logits_gguf = first.model(batch).logits
        logits_hf = second.model(batch).logits
    assert torch.equal(logits_gguf, logits_hf)
