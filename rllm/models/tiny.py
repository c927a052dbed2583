"""A tiny random causal LM with a char-level tokenizer, built offline: the model tests and
quick checks load instead of SmolLM2 (an HF directory, loaded like any other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["tiny_model_dir"]

_CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'][0] }}>{{ m['content'] }}|{% endfor %}"
    "{% if add_generation_prompt %}<a>{% endif %}"
)


def tiny_model_dir(directory: Path, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """Write a tiny random Llama and a char-level tokenizer with a chat template to
    ``directory`` (an HF model directory), for tests. Returns ``directory``."""
    import torch
    import transformers
    from tokenizers import (  # type: ignore[import-untyped]  # no stubs
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )

    tf: Any = transformers

    chars = list(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,?!:;'\"-+*=<>|/\n"
    )
    specials = ["<pad>", "<eos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = tf.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = _CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = tf.LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=1,
        pad_token_id=0,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = tf.LlamaForCausalLM(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory
