"""The ``react`` harness: an OpenAI tool-calling loop with the tools ``bash`` (run a
command), ``edit`` (write a file, or replace one occurrence in it) and ``submit`` (end);
a reply with no tool call ends the run too (the loop is ``agent_loop.py --style tools``)."""

from __future__ import annotations

from rllm.producers.harnesses.loop import LoopHarness

__all__ = ["ReactHarness"]


class ReactHarness(LoopHarness):
    """Tool calls: bash, edit, submit."""

    name = "react"
    version = "1"
    style = "tools"
