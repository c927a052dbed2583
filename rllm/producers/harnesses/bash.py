"""The ``bash`` harness: one tool, no tool-calling API. Each model call's reply is one
shell command (``run: CMD`` or a fenced block) that the loop runs in the sandbox, until
the model says ``done`` (the loop is ``agent_loop.py --style text``)."""

from __future__ import annotations

from rllm.producers.harnesses.loop import LoopHarness

__all__ = ["BashHarness"]


class BashHarness(LoopHarness):
    """One shell command per model call; ``done`` ends the run."""

    name = "bash"
    version = "1"
    style = "text"
