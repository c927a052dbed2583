"""Harnesses by name: ``get_harness("bash")``. Each harness is one module, imported only
when asked for."""

from __future__ import annotations

import importlib

from rllm.producers.harnesses.errors import UnknownHarnessError
from rllm.producers.harnesses.types import Harness

__all__ = ["HARNESSES", "get_harness", "harness_names"]

HARNESSES: dict[str, str] = {
    "oracle": "rllm.producers.harnesses.oracle:OracleHarness",
    "bash": "rllm.producers.harnesses.bash:BashHarness",
    "react": "rllm.producers.harnesses.react:ReactHarness",
    "mini-swe-agent": "rllm.producers.harnesses.mini_swe_agent:MiniSweAgentHarness",
    "claude-code": "rllm.producers.harnesses.claude_code:ClaudeCodeHarness",
    "codex": "rllm.producers.harnesses.codex:CodexHarness",
    "opencode": "rllm.producers.harnesses.opencode:OpencodeHarness",
    "qwen-code": "rllm.producers.harnesses.qwen_code:QwenCodeHarness",
    "continue": "rllm.producers.harnesses.continue_cli:ContinueHarness",
    "kilocode": "rllm.producers.harnesses.kilocode:KilocodeHarness",
    "aider": "rllm.producers.harnesses.aider:AiderHarness",
    "kimi-cli": "rllm.producers.harnesses.kimi_cli:KimiCliHarness",
    "terminus-2": "rllm.producers.harnesses.terminus_2:Terminus2Harness",
}
"""Harness name -> ``module:class``; the class takes no arguments."""


def harness_names() -> list[str]:
    """Every registered harness's name, sorted."""
    return sorted(HARNESSES)


def get_harness(name: str) -> Harness:
    """The harness called ``name``.

    Raises:
        UnknownHarnessError: no harness has that name (the known ones are listed).
    """
    target = HARNESSES.get(name)
    if target is None:
        raise UnknownHarnessError(
            f"unknown harness {name!r}; choose one of {', '.join(harness_names())} "
            f"(rllm-cli harness list shows them)"
        )
    module_name, _, attr = target.partition(":")
    harness: Harness = getattr(importlib.import_module(module_name), attr)()
    return harness
