"""Fixtures of the training tests: a tiny random model built offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.models.tiny import tiny_model_dir


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with a char-level tokenizer (an HF directory)."""
    return tiny_model_dir(tmp_path_factory.mktemp("tiny-model"))
