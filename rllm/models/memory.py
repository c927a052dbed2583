"""Keep large freed blocks in the process instead of returning them to the kernel.

glibc serves each large allocation with its own ``mmap`` and unmaps it when freed, so a
tensor allocated in every training step (the tied embedding's 49k x 576 gradient, the
logits) starts on fresh pages and faults each one in again: zeroing the embedding's
gradient took 68 ms where the memory itself needs a few. Raising the mmap and trim
thresholds lets ``malloc`` reuse those blocks; a training update on SmolLM2-135M went
from 6.1 s to 5.1 s on 2 cores. The process keeps its peak memory instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

__all__ = ["keep_freed_memory"]

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_THRESHOLDS = (1 << 30, 32 << 20)
"""Tried in order: glibc versions that cap the mmap threshold accept only 32 MiB."""


@functools.cache
def keep_freed_memory() -> bool:
    """Tune glibc's ``malloc`` once per process; False where it is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name or "libc.so.6").mallopt
    except (OSError, AttributeError):
        log.debug("no glibc mallopt here (%s); allocator left as it is", name)
        return False
    return any(
        mallopt(_M_MMAP_THRESHOLD, threshold) and mallopt(_M_TRIM_THRESHOLD, threshold)
        for threshold in _THRESHOLDS
    )
