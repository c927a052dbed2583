"""Evaluation runs: benchmarks through the gateway, scored, summarised."""

from __future__ import annotations

from rllm.producers.evaluation.runner import EvalConfig, run_eval, run_tasks
from rllm.producers.evaluation.summary import EvalSummary, pass_at_k, summarize

__all__ = ["EvalConfig", "EvalSummary", "pass_at_k", "run_eval", "run_tasks", "summarize"]
