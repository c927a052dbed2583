"""The local model server's batcher: concurrent requests wait a few milliseconds for others
and are generated as one batch; an abandoned request's rows stop at the next token."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from rllm.serving.engine import Completion, Engine, SamplingParams

__all__ = ["RequestBatcher"]


@dataclass
class _Pending:
    prompt: list[int]
    params: SamplingParams
    future: asyncio.Future[list[Completion]] = field(repr=False)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when the request is abandoned: its rows stop at the next token."""


class RequestBatcher:
    """Collects concurrent requests for ``wait_s`` and generates them as one batch."""

    def __init__(self, engine: Engine, max_batch: int = 32, wait_s: float = 0.01) -> None:
        self.engine, self.max_batch, self.wait_s = engine, max_batch, wait_s
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.batches: deque[int] = deque(maxlen=64)
        """Rows of the most recent generated batches (for tests and ``/health``)."""

    async def submit(self, prompt: list[int], params: SamplingParams) -> list[Completion]:
        """The ``params.n`` completions of one prompt."""
        fut: asyncio.Future[list[Completion]] = asyncio.get_running_loop().create_future()
        item = _Pending(prompt, params, fut)
        await self.queue.put(item)
        try:
            return await fut
        except asyncio.CancelledError:  # the client went away: drop it, queued or running
            item.stop.set()
            raise

    async def run(self) -> None:
        """Serve the queue until cancelled."""
        while True:
            items = [await self.queue.get()]
            rows = items[0].params.n
            deadline = time.monotonic() + self.wait_s
            while rows < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    break
                items.append(nxt)
                rows += nxt.params.n
            items = [it for it in items if not it.future.done()]  # not the abandoned ones
            if not items:
                continue
            prompts, params, stops = [], [], []
            for it in items:
                for k in range(it.params.n):
                    seed = None if it.params.seed is None else it.params.seed + k
                    prompts.append(it.prompt)
                    params.append(replace(it.params, seed=seed))
                    stops.append(it.stop)
            self.batches.append(len(prompts))
            try:
                outs = await asyncio.to_thread(self.engine.generate, prompts, params, stops)
            except Exception as exc:
                for it in items:
                    if not it.future.done():
                        it.future.set_exception(exc)
                continue
            at = 0
            for it in items:
                if not it.future.done():
                    it.future.set_result(outs[at : at + it.params.n])
                at += it.params.n
