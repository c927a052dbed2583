"""The ``local_model`` marker: tests that load the real SmolLM2 GGUF, which runs only where
``rllm-cli model install-local`` has put it into ``$RLLM_HOME/models``."""

from __future__ import annotations

import pytest

__all__: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "local_model: loads the SmolLM2 GGUF (`rllm-cli model install-local`, which .ci/run does)",
    )
