"""How many threads torch computes with: a fixed count, or ``auto``, which measures.

On a machine the trainer shares (the broker, the processors, the model server, other
tenants), the fastest count depends on what else runs, and it changes while it runs: a
background process that takes a core makes two threads wait on each other. On 2 free
cores two threads trained 1.7x and generated 1.3x faster than one. ``auto`` times the
work itself: it computes with the count
that has been faster, and every few steps runs one step with another count, right after
a step with the current one, so the two saw the same machine. The log of their ratio of
seconds per unit of work is averaged per count; a count that comes out faster takes
over. A probe costs one step at the slower count in ``probe_every``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Literal, ParamSpec, TypeVar

from pydantic import AfterValidator

from rllm.errors import ConfigError

__all__ = [
    "FixedThreads",
    "ThreadTuner",
    "Threads",
    "ThreadsSetting",
    "apply_threads",
    "check_threads",
    "compute",
    "on_compute_thread",
]

# torch is imported where threads are set: settings import this module, and the CLI
# should not load torch to parse them

Threads = int | Literal["auto"]
"""A fixed number of torch threads (0: torch's default), or ``auto``."""


def check_threads(threads: Threads) -> Threads:
    """``threads`` if it is ``auto`` or a count of at least 0, else a ConfigError."""
    count = isinstance(threads, int) and not isinstance(threads, bool)
    if threads != "auto" and (not count or threads < 0):
        raise ConfigError(
            f"torch threads must be a count of at least 0 (0: torch's default) or 'auto', "
            f"not {threads!r}"
        )
    return threads


ThreadsSetting = Annotated[Threads, AfterValidator(check_threads)]
"""A settings field of ``Threads``, checked by ``check_threads``."""


def apply_threads(threads: Threads) -> ThreadTuner | FixedThreads:
    """For ``auto``, a tuner to time the work with; else set the count now (0: leave
    torch's) and return what reports it."""
    if threads == "auto":
        return ThreadTuner()
    if threads:
        import torch

        on_compute_thread(torch.set_num_threads, threads)  # OpenMP's count is per thread
    return FixedThreads()


class FixedThreads:
    """A count set once (or torch's default): the steps are not timed. It has a
    ``ThreadTuner``'s methods, so callers treat both alike."""

    def __init__(self) -> None:
        self.count = 0
        """torch's thread count at the last ``hold`` (0: none yet)."""

    def hold(self) -> None:
        """Note the count the compute thread uses (reported without asking that thread,
        which may be busy)."""
        import torch

        self.count = torch.get_num_threads()

    def step(self, work: float) -> contextlib.AbstractContextManager[int]:
        """One step; nothing to choose or time."""
        return contextlib.nullcontext(self.count)

    def summary(self) -> dict[str, float]:
        """The count in use."""
        return {"threads": float(self.count)}


class ThreadTuner:
    """Chooses torch's intra-op thread count for repeated work by timing it in pairs."""

    def __init__(
        self,
        choices: tuple[int, ...] | None = None,
        probe_every: int = 6,
        smoothing: float = 0.3,
        switch_margin: float = 0.05,
    ) -> None:
        cores = os.cpu_count() or 1
        self.choices = choices or tuple(sorted({1, cores}))
        self.current = max(self.choices)
        """The count used for the work between probes."""
        self.probe_every = probe_every
        self.smoothing = smoothing
        self.switch_margin = switch_margin
        self.log_ratio = {c: 0.0 for c in self.choices}
        """Per count: smoothed log(its seconds per work / the current count's)."""
        self.pairs = {c: 0 for c in self.choices}
        """Per count: pairs measured against the current count."""
        self.steps = 0
        self._last: tuple[int, float] | None = None  # (count, seconds per work) of the last step
        self._probe_at = 0

    def choose(self) -> int:
        """The count for the next step: the current one, or a probe when one is due."""
        others = [c for c in self.choices if c != self.current]
        if not others or self._last is None or self._last[0] != self.current:
            return self.current
        # probe the least measured other count early, then every probe_every steps
        unmeasured = [c for c in others if self.pairs[c] < 2]
        due = self.steps - self._probe_at >= (2 if unmeasured else self.probe_every)
        if not due:
            return self.current
        return min(others, key=lambda c: self.pairs[c])

    @contextlib.contextmanager
    def step(self, work: float) -> Iterator[int]:
        """Run one step of ``work`` units (rows, tokens) with the chosen count."""
        import torch

        count = self.choose()
        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
        started = time.perf_counter()
        yield count
        self.observe(count, time.perf_counter() - started, work)

    def observe(self, count: int, seconds: float, work: float) -> None:
        """Record one step; a probe is compared with the step just before it."""
        self.steps += 1
        rate = seconds / max(work, 1e-9)
        last, self._last = self._last, (count, rate)
        if count == self.current or last is None or last[0] != self.current or rate <= 0:
            return
        self._probe_at = self.steps
        ratio = math.log(rate / last[1]) if last[1] > 0 else 0.0
        n, a = self.pairs[count], self.smoothing
        self.log_ratio[count] = ratio if n == 0 else (1 - a) * self.log_ratio[count] + a * ratio
        self.pairs[count] = n + 1
        if self.pairs[count] >= 2 and self.log_ratio[count] < -self.switch_margin:
            self._switch(count)

    def _switch(self, count: int) -> None:
        """Make ``count`` current; the old current's ratio is now the inverse."""
        gain, measured, old = self.log_ratio[count], self.pairs[count], self.current
        self.current = count
        for c in self.choices:
            self.log_ratio[c], self.pairs[c] = (-gain, measured) if c == old else (0.0, 0)
        self._last = None

    def hold(self) -> None:
        """Compute with the current count outside timed steps; the next step is not
        paired with the last (other work came between)."""
        import torch

        if torch.get_num_threads() != self.current:
            torch.set_num_threads(self.current)
        self._last = None

    def summary(self) -> dict[str, float]:
        """The current count and each other count's measured speed relative to it."""
        out: dict[str, float] = {"threads": float(self.current)}
        for c in self.choices:
            if c != self.current and self.pairs[c]:
                out[f"threads_{c}_relative_time"] = round(math.exp(self.log_ratio[c]), 3)
        return out


# --- one compute thread per process ------------------------------------------------------
# OpenMP (libgomp, which torch's CPU builds use) keeps a team of worker threads for every
# thread that has run a parallel region. Once the workers of all teams outnumber the cores,
# each worker spins 100 times instead of ~3 ms before it sleeps between regions, and a
# decode step's few hundred small regions each wait on a futex wake. The model server
# loaded its model on the main thread and generated on another: two threads were then
# 1.2x slower than one, where on a single thread they were 1.3x faster. So every torch
# computation of the server and the local backend runs on this one thread.

_compute: concurrent.futures.ThreadPoolExecutor | None = None
_compute_lock = threading.Lock()
_on_compute = threading.local()

P = ParamSpec("P")
R = TypeVar("R")


def _mark() -> None:
    _on_compute.active = True


def on_compute_thread(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``fn`` on the process's torch compute thread and return (or raise) its result;
    inline when already there."""
    global _compute
    if getattr(_on_compute, "active", False):
        return fn(*args, **kwargs)
    with _compute_lock:
        if _compute is None:
            _compute = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="rllm-torch", initializer=_mark
            )
    return _compute.submit(fn, *args, **kwargs).result()


def compute(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a function whose torch work must run on the compute thread."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return on_compute_thread(fn, *args, **kwargs)

    return wrapper
