"""The text of sampled tokens the answer did not spell out: decoded with the run's
tokenizer when this machine holds it (a local model directory the steps name, or the
installed SmolLM2-135M for its name). Nothing is downloaded; without one the page shows
token IDs and says why."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rllm.errors import ConfigError

__all__ = ["Decoder", "decoder_for"]

Decoder = Callable[[int], str]
"""A token ID's text."""

_INSTALLED = "smollm2-135m"
"""The model ``rllm-cli model install-local`` installs, by the tail of its name."""


@functools.lru_cache(maxsize=8)
def decoder_for(model: str) -> Decoder | None:
    """A decoder for ``model``'s token IDs, or None when no tokenizer for it is here."""
    if Path(model).is_dir():
        where = model
    elif model.rsplit("/", 1)[-1].lower().startswith(_INSTALLED):
        where = ""  # the installed default model
    else:
        return None
    try:
        from rllm.models.loading import load_tokenizer

        tokenizer: Any = load_tokenizer(where)
    except (ConfigError, ImportError):
        return None
    return lambda token_id: str(tokenizer.decode([token_id]))
