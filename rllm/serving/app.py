"""The local model server's ASGI app: the routes of ``rllm.serving.routes`` over one
engine, whose concurrent requests the batcher generates together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette

from rllm.schemas.lineage import POLICY_HEADER
from rllm.serving.batcher import RequestBatcher
from rllm.serving.engine import Engine
from rllm.serving.routes import ROUTES, ServedModel

__all__ = ["POLICY_HEADER", "RequestBatcher", "create_app"]


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """Run the app's batcher while the app runs."""
    task = asyncio.create_task(app.state.batcher.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def create_app(
    engine: Engine, model_name: str = "local", max_batch: int = 32, batch_wait_ms: float = 10.0
) -> Starlette:
    """The ASGI app serving ``engine`` as ``model_name``. ``app.state`` holds ``served``
    (what the routes read) and its ``engine`` and ``batcher``."""
    batcher = RequestBatcher(engine, max_batch, batch_wait_ms / 1000)
    app = Starlette(routes=ROUTES, lifespan=_lifespan)
    app.state.served = ServedModel(engine, batcher, model_name)
    app.state.engine, app.state.batcher = engine, batcher
    return app
