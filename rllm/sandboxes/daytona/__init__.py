"""The ``daytona`` sandbox backend: sandboxes on Daytona through its SDK (``backend``),
one sandbox (``sandbox``), the SDK client and its errors (``client``), and the command
wrapper and spec checks the hosted backends share (``remote``)."""

from __future__ import annotations

from rllm.sandboxes.daytona.backend import DaytonaBackend
from rllm.sandboxes.daytona.sandbox import DaytonaSandbox
from rllm.sandboxes.daytona.snapshots import DaytonaSnapshots

__all__ = ["DaytonaBackend", "DaytonaSandbox", "DaytonaSnapshots"]
