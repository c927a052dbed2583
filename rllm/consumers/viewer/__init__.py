"""``rllm-cli view``: a local, read-only web app over the history (runs, a run's curves,
trajectories turn by turn, comparisons), reading what ``rllm-cli analytics`` reads."""

from __future__ import annotations

from rllm.consumers.viewer.app import create_app
from rllm.consumers.viewer.errors import BadRequestError, NotFoundError, ViewerError
from rllm.consumers.viewer.serve import serve
from rllm.consumers.viewer.settings import ViewerSettings, is_loopback
from rllm.consumers.viewer.source import HistorySource, StoreSource, fixed_source

__all__ = [
    "BadRequestError",
    "HistorySource",
    "NotFoundError",
    "StoreSource",
    "ViewerError",
    "ViewerSettings",
    "create_app",
    "fixed_source",
    "is_loopback",
    "serve",
]
