"""The ``local`` sandbox backend: bubblewrap over a kernel overlay (no daemon).

Its names are imported when first used, so that ``rllm.sandboxes.forward`` (which the
docker backend uses too) can import ``local.syscalls`` without the whole backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rllm.sandboxes.local.backend import LocalBackend, LocalSnapshots
    from rllm.sandboxes.local.sandbox import LocalSandbox

__all__ = ["LocalBackend", "LocalSandbox", "LocalSnapshots"]

_WHERE = {
    "LocalBackend": "rllm.sandboxes.local.backend",
    "LocalSnapshots": "rllm.sandboxes.local.backend",
    "LocalSandbox": "rllm.sandboxes.local.sandbox",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
