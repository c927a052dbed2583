"""What the ``rllm-cli sandbox`` commands share: the ``--backend`` option, running one
coroutine against a backend, and ages for people."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

__all__ = ["age", "backend_option", "with_backend"]

T = TypeVar("T")


def backend_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--backend",
        default=None,
        envvar="RLLM_SANDBOX_BACKEND",
        help="local, docker, daytona or modal [default: local].",
    )(func)


def with_backend(
    name: str | None,
    work: Callable[[Any], Awaitable[T]],
    substitutes: dict[str, str] | None = None,
) -> T:
    """Run ``work(backend)`` on a fresh event loop, closing the backend afterwards;
    ``substitutes`` add to ``RLLM_SANDBOX_IMAGE_SUBSTITUTES``."""
    from rllm.sandboxes import SandboxSettings, get_backend

    settings = SandboxSettings()
    if substitutes:
        merged = {**settings.image_substitutes, **substitutes}
        settings = settings.model_copy(update={"image_substitutes": merged})

    async def main() -> T:
        backend = get_backend(name, settings)
        try:
            return await work(backend)
        finally:
            await backend.aclose()

    return asyncio.run(main())


def age(seconds: float) -> str:
    """``seconds`` in the largest unit it fills: ``2.5h``, ``90s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"
