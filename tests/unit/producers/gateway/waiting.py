"""Waiting, in a gateway unit test, for a background task to reach a state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(done: Callable[[], bool], what: str) -> None:
    """Return once ``done()`` holds; fail with ``what`` after about five seconds."""
    for _ in range(500):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)
