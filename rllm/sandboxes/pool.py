"""Warm pools: sandboxes created ahead so that a rollout starts without waiting for one.

``WarmPool(backend, spec, size)`` keeps up to ``size`` sandboxes ready, checks each is
alive before handing it out (a dead one is closed and counted as replaced), refills in the
background after every handoff, and closes what is left at ``close()``, at process exit
and on SIGTERM (which then exits with status 143 through Python's shutdown, so the
finalizers of sandboxes already handed out close them too). A sandbox handed out is the
caller's: it is closed by the caller, never returned (a rollout's sandbox is dirty).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import signal
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from rllm.errors import ConfigError
from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.types import Sandbox, SandboxBackend, SandboxSpec

__all__ = ["PoolStats", "WarmPool"]

log = logging.getLogger(__name__)

_LIVE_POOLS: weakref.WeakSet[WarmPool] = weakref.WeakSet()
_PREVIOUS_SIGTERM: Any = None


@dataclass
class PoolStats:
    """What a pool did so far."""

    created: int = 0
    """Sandboxes it created."""
    handed_out: int = 0
    """Acquires served from the ready queue."""
    cold: int = 0
    """Acquires that found the queue empty and created a sandbox on the spot."""
    replaced: int = 0
    """Ready sandboxes found dead at acquire, closed and replaced."""
    failed: int = 0
    """Creations that raised."""


class WarmPool:
    """Up to ``size`` ready sandboxes of one spec on one backend.

    Args:
        backend: where the sandboxes are created.
        spec: what every sandbox is created from.
        size: how many to keep ready.
        concurrency: most creations in flight at once (2 cores: keep it small).
        handle_sigterm: close the pool's sandboxes on SIGTERM, then exit as SIGTERM would.

    Raises:
        ConfigError: a negative ``size``.
    """

    def __init__(
        self,
        backend: SandboxBackend,
        spec: SandboxSpec,
        size: int,
        *,
        concurrency: int = 2,
        handle_sigterm: bool = True,
    ) -> None:
        if size < 0:
            raise ConfigError(f"a warm pool's size must be >= 0, got {size}")
        self.backend, self.spec, self.size = backend, spec, size
        self.stats = PoolStats()
        self._ready: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._creating = 0
        self._limit = asyncio.Semaphore(max(1, concurrency))
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._last_error: BaseException | None = None
        self._handle_sigterm = handle_sigterm

    # --- lifecycle ------------------------------------------------------------------
    async def start(self, wait: bool = False) -> WarmPool:
        """Begin filling; with ``wait``, return once ``size`` sandboxes are ready."""
        _register(self, self._handle_sigterm)
        self._refill()
        if wait:
            await self.wait_ready()
        return self

    async def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until ``size`` sandboxes are ready (or a creation failed: raises it)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._ready.qsize() < self.size:
            if self._last_error is not None and self._creating == 0:
                raise SandboxError(
                    f"the warm pool could not create a sandbox: {self._last_error}"
                ) from self._last_error
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"warm pool: {self._ready.qsize()} of {self.size} ready after {timeout_s} s"
                )
            await asyncio.sleep(0.01)

    async def __aenter__(self) -> WarmPool:
        return await self.start()

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop refilling and close every sandbox still ready. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        while not self._ready.empty():
            await self._ready.get_nowait().close()
        _LIVE_POOLS.discard(self)

    # --- handing out ----------------------------------------------------------------
    @property
    def ready(self) -> int:
        """Sandboxes ready now."""
        return self._ready.qsize()

    async def acquire(self) -> Sandbox:
        """A live sandbox: a ready one (one handoff) or, when none is ready, a new one."""
        if self._closed:
            raise SandboxError("the warm pool is closed")
        while not self._ready.empty():
            sandbox = self._ready.get_nowait()
            if await sandbox.is_alive():
                self.stats.handed_out += 1
                self._refill()
                return sandbox
            self.stats.replaced += 1
            log.warning("warm pool: sandbox %s died while ready; replacing it", sandbox.id)
            await sandbox.close()
        self.stats.cold += 1
        self._refill()
        return await self.backend.create(self.spec)

    # --- filling ----------------------------------------------------------------------
    def _refill(self) -> None:
        missing = self.size - self._ready.qsize() - self._creating
        for _ in range(max(0, missing)):
            self._creating += 1
            task = asyncio.get_running_loop().create_task(self._create_one())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _create_one(self) -> None:
        try:
            async with self._limit:
                sandbox = await self.backend.create(self.spec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # recorded, reported by wait_ready and the log
            self.stats.failed += 1
            self._last_error = exc
            log.error("warm pool: creating a sandbox failed: %s", exc)
            return
        finally:
            self._creating -= 1
        self.stats.created += 1
        if self._closed:
            await sandbox.close()
            return
        self._ready.put_nowait(sandbox)

    def _close_now(self) -> None:
        """Close ready sandboxes without an event loop (exit, signal)."""
        self._closed = True
        while not self._ready.empty():
            sandbox = self._ready.get_nowait()
            closer: Callable[[], object] | None = getattr(sandbox, "close_sync", None)
            if closer is not None:
                closer()
            else:
                # with a loop running in this thread, asyncio.run refuses: the finalizers act
                with contextlib.suppress(RuntimeError):
                    asyncio.run(sandbox.close())


def _register(pool: WarmPool, handle_sigterm: bool) -> None:
    global _PREVIOUS_SIGTERM
    first = not _LIVE_POOLS and _PREVIOUS_SIGTERM is None
    _LIVE_POOLS.add(pool)
    if not first:
        return
    atexit.register(_close_all)
    if handle_sigterm:
        try:
            _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread: leave signals to the application
            _PREVIOUS_SIGTERM = signal.SIG_DFL


def _close_all() -> None:
    for pool in list(_LIVE_POOLS):
        pool._close_now()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _PREVIOUS_SIGTERM
    if callable(previous):
        _close_all()
        previous(signum, frame)
        return
    # exit as Python does: atexit closes the pools' ready sandboxes (outside any event
    # loop), and the finalizers of sandboxes already handed out close those
    raise SystemExit(128 + signum)
