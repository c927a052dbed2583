"""``rllm-cli``: thin commands that build a config object and call one library function."""

from __future__ import annotations

from rllm.cli.main import main

__all__ = ["main"]
