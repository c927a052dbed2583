"""Replay: SFT datasets from the event log or from the history."""

from __future__ import annotations

from rllm.consumers.replay.select import select_examples, session_examples
from rllm.consumers.replay.sources import sessions_from_history, sessions_from_topic
from rllm.consumers.replay.types import ReplayFilter, SftExample
from rllm.consumers.replay.writers import write_dataset

__all__ = [
    "ReplayFilter",
    "SftExample",
    "select_examples",
    "session_examples",
    "sessions_from_history",
    "sessions_from_topic",
    "write_dataset",
]
