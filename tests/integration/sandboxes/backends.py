"""Each backend of the contract suite, opened the way its tests need: local as it is,
docker on the dockerd that CI (or the fixture) starts, daytona and modal on their fakes."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from rllm.sandboxes import SandboxBackend, SandboxSettings, get_backend
from rllm.sandboxes.local.backend import LocalBackend


@asynccontextmanager
async def local_backend(settings: SandboxSettings) -> AsyncIterator[LocalBackend]:
    """A local backend on ``settings``'s home; afterwards closes and reaps what it made
    and removes the home."""
    made = get_backend("local", settings)
    assert isinstance(made, LocalBackend)
    yield made
    await made.aclose()
    await made.reap()
    shutil.rmtree(settings.home, ignore_errors=True)


@asynccontextmanager
async def open_backend(
    name: str, settings: SandboxSettings, request: pytest.FixtureRequest
) -> AsyncIterator[SandboxBackend]:
    """The backend called ``name`` for one test; closes what it created afterwards."""
    if name == "local":
        backend = get_backend("local", settings)
    elif name == "docker":
        docker_settings = request.getfixturevalue("docker_backend_settings")
        backend = get_backend("docker", settings.model_copy(update=docker_settings))
    elif name == "daytona":
        from tests.fakes_sandboxes import daytona_backend

        async with daytona_backend(settings) as hosted:
            yield hosted
        return
    elif name == "modal":
        from tests.fakes_sandboxes import modal_backend

        async with modal_backend(settings) as hosted:
            yield hosted
        return
    else:
        raise ValueError(f"no such backend in the contract suite: {name!r}")
    try:
        yield backend
    finally:
        await backend.aclose()
