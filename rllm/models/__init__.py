"""The model runtime the model server and the local training backend share, and the user's
model profiles.

- ``loading``: a causal LM and its tokenizer from local files (HF directory, GGUF),
  checkpoint weights; ``tiny``: a tiny random model for tests.
- ``runtime``: what a computing process sets up once (``memory``, ``threads``, loading).
- ``sampling``: the distribution a token is sampled from, for server and trainer alike.
- ``local``: installing the default local model, SmolLM2-135M-Instruct.
- ``profiles``: which upstream model ``eval``/``train`` talk to, stored per user.

Importing the package loads neither torch nor transformers.
"""

from __future__ import annotations

from rllm.models.loading import LoadedModel, load_model, load_tokenizer
from rllm.models.profiles import (
    PROVIDERS,
    ModelConfigError,
    ModelProfile,
    Provider,
    UserConfig,
    config_path,
    load_config,
    mask_key,
    resolve_api_key,
    save_config,
)
from rllm.models.runtime import ModelRuntime, start_runtime
from rllm.models.threads import Threads

__all__ = [
    "PROVIDERS",
    "LoadedModel",
    "ModelConfigError",
    "ModelProfile",
    "ModelRuntime",
    "Provider",
    "Threads",
    "UserConfig",
    "config_path",
    "load_config",
    "load_model",
    "load_tokenizer",
    "mask_key",
    "resolve_api_key",
    "save_config",
    "start_runtime",
]
