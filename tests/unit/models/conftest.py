"""Each model test gets its own config folder and no provider keys from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def config_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh ``RLLM_CONFIG_DIR``."""
    folder = tmp_path / "rllm-config"
    monkeypatch.setenv("RLLM_CONFIG_DIR", str(folder))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VLLM_API_KEY", "SGLANG_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return folder
